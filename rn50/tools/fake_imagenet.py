"""Fake ImageNet: an ImageFolder tree of random JPEGs shaped like ImageNet's.

For benchmarking the JPEG input pipeline where the real data set is absent:
the files are baseline RGB JPEGs of about 500x375 (shapes vary per image) and
about 110 KB on average, as ImageNet's are, so decoding and augmenting them
costs about what it does for real photographs. The pictures mean nothing.

    OUT/train/n00000003/n00000003_000017.JPEG
    OUT/val/n00000003/ILSVRC2012_val_00000017.JPEG

Usage:
    python -m rn50.fake_imagenet OUT --classes N --train-per-class M --val-per-class K
                                 [--workers W] [--seed S] [--quality Q] [--learnable]

Each image's content depends only on the seed, its split and its index, so the
same command makes byte-identical files whatever the number of workers.

--learnable gives each class a colour of its own (hues spread around the colour
circle, the pictures' own colour noise turned down), which survives the crops and
flips of training, so a network can learn the classes: train=accuracy on such a
tree shows that a precision trains (rn50 issue 27). Without it the labels mean
nothing and only the pipeline's speed is real.
"""

import argparse
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import numpy as np
from PIL import Image

from rn50.measure.meter import Meter

PROG = "rn50.fake_imagenet"
PROGRESS_FROM = 100
QUALITY = 95  # with the content below, puts the mean file near ImageNet's ~110 KB
# ImageNet's commonest shapes (4:3 landscape, 3:4 portrait, 3:2) and roughly how often they occur.
SHAPES, SHAPE_P = [(500, 375), (375, 500), (500, 333), (333, 500)], [0.55, 0.2, 0.15, 0.1]


def _size(rng):
    w, h = SHAPES[rng.choice(len(SHAPES), p=SHAPE_P)]
    if rng.random() < 0.3:  # photos cropped to other aspect ratios
        w, h = (w, round(h * rng.uniform(0.8, 1.2))) if w > h else (round(w * rng.uniform(0.8, 1.2)), h)
    return w, h


def _up(a, w, h):
    return Image.fromarray(a.astype(np.float32, copy=False)).resize((w, h), Image.BICUBIC)


def _field(rng, w, h, cell):
    """Smooth noise whose features are about `cell` pixels across."""
    grid = rng.standard_normal((h // cell + 3, w // cell + 3), dtype=np.float32)
    # Sample inside the grid's margin, so each grid cell spans `cell` pixels, borders included.
    box = (1, 1, 1 + w / cell, 1 + h / cell)
    return np.asarray(Image.fromarray(grid).resize((w, h), Image.BICUBIC, box=box))


MAX_LEARNABLE = 24  # classes 15 degrees apart on the colour circle at the least


def class_hue(label: int, classes: int) -> tuple:
    """The (Cb, Cr) offsets of a learnable tree's class: its own point on the colour circle."""
    angle = 2 * np.pi * label / classes
    return 60 * np.cos(angle), 60 * np.sin(angle)


def picture(rng, hue: Optional[tuple] = None) -> Image.Image:
    """Shapes with crisp edges, textures and grain at several scales, in random colours.

    Built in YCbCr, as JPEG stores it: luma at full size, chroma at half size (4:2:0
    keeps no more), which is a third of the float work of building RGB.
    """
    w, h = _size(rng)
    hw, hh = (w + 1) // 2, (h + 1) // 2
    # Octaves with amplitudes falling with frequency, roughly like photographs' spectra.
    relief = sum((cell / 64) ** 0.5 * _field(rng, hw, hh, cell) for cell in (64, 32, 16, 8, 4, 2))
    shapes = np.tanh(4 * relief)
    noise = 1.0 if hue is None else 0.2  # a learnable class's colour stands out of the pictures' own
    chroma = [_up(np.clip(128 + (0 if hue is None else hue[i])
                          + noise * (30 * _field(rng, hw, hh, 80) + rng.uniform(-30, 30) * shapes), 0, 255), w, h)
              .convert("L") for i in range(2)]
    busy = rng.uniform(0.5, 1.5)  # spreads file sizes, as real photos range from plain to busy
    y = np.tanh(4 * np.asarray(_up(relief, w, h))) * (50 * rng.uniform(0.6, 1.4))
    y += rng.uniform(60, 190) + 30 * _field(rng, w, h, 100) + busy * 30 * _field(rng, w, h, 3)
    y += busy * rng.integers(-12, 13, (h, w), dtype=np.int8)
    luma = Image.fromarray(np.clip(y, 0, 255).astype(np.uint8))
    return Image.merge("YCbCr", [luma, *chroma])


def _write(job):
    path, key, quality, hue = job
    picture(np.random.default_rng(key), hue).save(path, "JPEG", quality=quality)
    return path.parent.parent.name, path.stat().st_size


def _jobs(out, classes, per_class, split, seed, quality, learnable):
    for c in range(classes):
        wnid = f"n{c:08d}"
        (out / split / wnid).mkdir(parents=True)
        hue = class_hue(c, classes) if learnable else None
        for i in range(per_class):
            name = f"{wnid}_{i:06d}" if split == "train" else f"ILSVRC2012_val_{c * per_class + i + 1:08d}"
            yield out / split / wnid / f"{name}.JPEG", (seed, int(split == "val"), c, i), quality, hue


def make(out: Path, classes: int, train_per_class: int, val_per_class: int,
         workers: int = os.cpu_count() or 1, seed: int = 0, quality: int = QUALITY,
         progress: Optional[bool] = None, learnable: bool = False) -> dict:
    """Write the tree; returns images and bytes per split and in all. Raises ValueError on bad arguments.

    progress: a bar on stderr if it is a terminal, else a line every 10 s; None shows it for
    PROGRESS_FROM images or more (smaller jobs end before it would help).
    """
    out = Path(out)
    for name, value, least in (("--classes", classes, 1), ("--train-per-class", train_per_class, 1),
                               ("--val-per-class", val_per_class, 0), ("--workers", workers, 1),
                               ("--seed", seed, 0)):
        if value < least:
            raise ValueError(f"{name} must be >= {least}, got {value}")
    if learnable and classes > MAX_LEARNABLE:
        raise ValueError(f"--learnable gives each class its own colour, {MAX_LEARNABLE} at most (closer hues blur "
                         f"in JPEG's chroma); use --classes {MAX_LEARNABLE} or fewer, got {classes}")
    if not 1 <= quality <= 100:
        raise ValueError(f"--quality must be between 1 and 100, got {quality}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} exists and is not empty: choose a new directory or remove it")
    jobs = [*_jobs(out, classes, train_per_class, "train", seed, quality, learnable),
            *_jobs(out, classes, val_per_class, "val", seed, quality, learnable)]
    total, start = len(jobs), time.monotonic()
    if progress is None:
        progress = total >= PROGRESS_FROM
    meter = Meter(PROG.split(".")[-1], total, "images") if progress else None
    stats = {"train_images": 0, "train_bytes": 0, "val_images": 0, "val_bytes": 0}

    def written(sizes) -> None:
        for done, (split, size) in enumerate(sizes, 1):
            stats[f"{split}_images"] += 1
            stats[f"{split}_bytes"] += size
            if meter:
                meter.update(done, f"{done / (time.monotonic() - start):.0f} images/s")

    if min(workers, total) == 1:  # no processes to start
        written(map(_write, jobs))
    else:
        with pool_context().Pool(min(workers, total)) as pool:
            written(pool.imap_unordered(_write, jobs, chunksize=8))
    if meter:
        meter.done = total
        meter.finish()
    stats.update(images=total, bytes=stats["train_bytes"] + stats["val_bytes"], seconds=time.monotonic() - start)
    return stats


def pool_context():
    """How the writers start: forked, unless this process has other threads on a CPython before 3.12,
    where a forked child can deadlock in os.fork() itself (cpython gh-112275, as for rn50's DataLoader
    workers: rn50/data/modules.py worker_context). `python -m rn50.fake_imagenet` has none; a caller
    that does (a test runner that has used MLflow, whose threads log) gets spawned writers: a child
    forked from such a pytest worker hung once in a test run here (these writers or a DataLoader's)."""
    if sys.version_info >= (3, 12) or threading.active_count() == 1:
        return multiprocessing.get_context()
    return multiprocessing.get_context("spawn")


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PROG, description="Write a fake ImageNet ImageFolder tree of JPEGs.")
    parser.add_argument("out", type=Path, metavar="OUT", help="new (or empty) directory to write")
    parser.add_argument("--classes", type=int, required=True, metavar="N")
    parser.add_argument("--train-per-class", type=int, required=True, metavar="M")
    parser.add_argument("--val-per-class", type=int, required=True, metavar="K")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="W",
                        help="processes (default: all CPUs)")
    parser.add_argument("--seed", type=int, default=0, metavar="S")
    parser.add_argument("--quality", type=int, default=QUALITY, metavar="Q",
                        help=f"JPEG quality (default: {QUALITY})")
    parser.add_argument("--learnable", action="store_true",
                        help="give each class a colour of its own, so that train=accuracy can learn the classes "
                             f"(--classes {MAX_LEARNABLE} at most)")
    args = parser.parse_args(argv)
    try:
        s = make(args.out, args.classes, args.train_per_class, args.val_per_class,
                 args.workers, args.seed, args.quality, learnable=args.learnable)
    except ValueError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"fake_imagenet: wrote {s['images']} images ({s['train_images']} train, {s['val_images']} val) "
          f"to {args.out}: {s['bytes'] / 2**20:.1f} MiB, mean {s['bytes'] / s['images'] / 1024:.1f} KB, "
          f"{s['images'] / s['seconds']:.0f} images/s")


if __name__ == "__main__":
    main()
