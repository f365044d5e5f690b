"""rn50.fake_imagenet: the tree ImageFolder reads, ImageNet-like JPEGs and determinism (the CLI:
tests/e2e/test_fake_imagenet_cli.py)."""

import pytest
from PIL import Image
from torchvision.datasets import ImageFolder

from rn50.tools.fake_imagenet import make

N, M, K = 3, 8, 4  # 36 images: enough for a mean file size, quick on 2 cores


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    out = tmp_path_factory.mktemp("fake") / "imagenet"
    return out, make(out, classes=N, train_per_class=M, val_per_class=K, workers=2, seed=0)


def test_tree_is_an_image_folder(tree):
    out, stats = tree
    assert sorted(p.name for p in out.iterdir()) == ["train", "val"]
    for split, per_class in (("train", M), ("val", K)):
        classes = sorted((out / split).iterdir())
        assert [c.name for c in classes] == [f"n{i:08d}" for i in range(N)]
        for c in classes:
            assert len(list(c.glob("*.JPEG"))) == len(list(c.iterdir())) == per_class
    assert (out / "train/n00000002/n00000002_000007.JPEG").is_file()
    assert (out / "val/n00000000/ILSVRC2012_val_00000001.JPEG").is_file()
    train, val = ImageFolder(out / "train"), ImageFolder(out / "val")
    assert len(train.classes) == len(val.classes) == N
    assert len(train) == N * M and len(val) == N * K
    assert stats["train_images"] == N * M and stats["val_images"] == N * K and stats["images"] == N * (M + K)


def test_images_look_like_imagenet(tree):
    out, stats = tree
    files = sorted(out.glob("*/*/*.JPEG"))
    sizes = set()
    for f in files:
        with Image.open(f) as im:
            assert im.format == "JPEG" and im.mode == "RGB"
            assert not im.info.get("progressive")
            im.load()
            assert all(200 <= side <= 800 for side in im.size), (f, im.size)
            sizes.add(im.size)
    assert len(sizes) > 1  # shapes vary, as ImageNet's do
    total = sum(f.stat().st_size for f in files)
    assert total == stats["bytes"]
    assert 60 * 1024 < total / len(files) < 200 * 1024


def test_same_seed_same_bytes(tmp_path):
    def files(out, workers):
        make(out, classes=2, train_per_class=2, val_per_class=1, workers=workers, seed=7)
        return {p.relative_to(out): p.read_bytes() for p in out.rglob("*.JPEG")}

    a, b = files(tmp_path / "a", 1), files(tmp_path / "b", 2)
    assert len(a) == 6 and a == b


def test_writers_are_spawned_where_a_fork_could_deadlock(monkeypatch):
    """A forked child of a process with other threads can deadlock on CPython before 3.12 (gh-112275)."""
    import multiprocessing
    import sys
    import threading

    from rn50.tools import fake_imagenet

    default = multiprocessing.get_context().get_start_method()  # fork on Linux before 3.14
    monkeypatch.setattr(sys, "version_info", (3, 11, 7))
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert fake_imagenet.pool_context().get_start_method() == default  # the CLI: one thread
    monkeypatch.setattr(threading, "active_count", lambda: 3)
    assert fake_imagenet.pool_context().get_start_method() == "spawn"
    monkeypatch.setattr(sys, "version_info", (3, 12, 0))
    assert fake_imagenet.pool_context().get_start_method() == default


def test_one_writer_starts_no_process(tmp_path, monkeypatch):
    from rn50.tools import fake_imagenet

    monkeypatch.setattr(fake_imagenet, "pool_context", lambda: pytest.fail("a pool for one writer"))
    stats = make(tmp_path / "one", classes=2, train_per_class=2, val_per_class=1, workers=1, seed=7)
    assert stats["images"] == 6
