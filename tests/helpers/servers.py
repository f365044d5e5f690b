"""Servers the tests start: a port for one, and the wait until it answers."""
import socket
import subprocess
import time
import urllib.request

import pytest


def free_port() -> int:
    """A TCP port nothing listens on, on any address: port 0 lets the kernel pick one."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def wait_for_server(url: str, proc: subprocess.Popen, what: str) -> None:
    """Until url answers, however long a busy machine takes; a server (proc) that exits first fails the test."""
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"{what} exited with {proc.returncode} before {url} answered")
            time.sleep(0.5)
