"""The devices a test runs on, to parametrize it by: the CPU, and CUDA for the tests marked gpu."""
import pytest

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
