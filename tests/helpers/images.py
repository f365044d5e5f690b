"""Real image files for the data pipelines: a small ImageFolder tree, and TINY's run reading one."""
from pathlib import Path

from helpers import TINY

# TINY on a real tree (data=imagefolder or data=dali, data.root=...): one loader worker, one DALI thread.
REAL = [*TINY, "data.num_workers=1", "data.dali.num_threads=1"]


def make_tree(root, classes=3, per_class=4, size=(80, 60)):
    """A small ImageFolder tree of real JPEGs: root/train/<class>/*.JPEG and root/val/."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, count in (("train", per_class), ("val", 1)):
        for c in range(classes):
            folder = Path(root) / split / f"n{c:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                pixels = rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"n{c:08d}_{i}.JPEG", quality=85)
    return Path(root)
