"""Checks of a run's inputs that need neither torch nor a GPU: they run before any rank starts."""

import os
from pathlib import Path

from rn50.errors import ConfigError

# What torchvision's ImageFolder reads (datasets.folder.IMG_EXTENSIONS), without importing it.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
MISSING_DALI = ('data=dali needs NVIDIA DALI: pip install -e ".[dali-cuda130]" (extras dali-cuda110, '
                'dali-cuda120, dali-cuda130: pick the one matching your CUDA major version)')


def images_under(folder) -> int:
    """Image files anywhere below folder, as ImageFolder finds them (subfolders too)."""
    return sum(1 for _, _, files in os.walk(folder) for f in files if f.lower().endswith(IMAGE_EXTENSIONS))


def count_train_images(root: str, global_batch: int) -> int:
    """Check root/train/<class>/ before any process starts; ConfigError says what is wrong."""
    train = Path(root) / "train"
    if Path(root).exists() and not Path(root).is_dir():
        raise ConfigError(f"data.root={root} is a file, not a folder; point it at the folder that holds "
                          "train/<class>/*.JPEG")
    if not Path(root).is_dir():
        raise ConfigError(f"data.root={root} does not exist; point it at a tree with train/<class>/*.JPEG")
    if not train.is_dir():
        raise ConfigError(f"data.root={root} has no train/ folder; expected train/<class>/*.JPEG")
    classes = [str(train / name) for name in class_folders(root)]
    if not classes:
        raise ConfigError(f"data.root={root}: train/ has no class folders; expected train/<class>/*.JPEG")
    images = 0
    for folder in classes:  # ImageFolder looks into subfolders too, and refuses an empty class
        found = images_under(folder)
        if not found:
            raise ConfigError(f"data.root={root}: class folder {folder} has no images")
        images += found
    if images < global_batch:
        raise ConfigError(
            f"data.root={root} has {images} training images, fewer than one global batch of "
            f"{global_batch}; lower data.batch_size or add images"
        )
    return images


def class_folders(root: str) -> list:
    """root/train's class folders in label order (ImageFolder's: sorted names); none if it is missing."""
    train = Path(root) / "train"
    return sorted(d.name for d in os.scandir(train) if d.is_dir()) if train.is_dir() else []


def check_classes(root: str, num_classes: int, found: int) -> None:
    """A classifier head with an output for each of the `found` labels root's class folders give."""
    if found > num_classes:
        raise ConfigError(f"model.num_classes={num_classes} is out of range: data.root={root} has {found} class "
                          f"folders, labelled 0 to {found - 1}; use model.num_classes={found} or more, or leave "
                          "it unset (null) to follow the folders")


def check_val_tree(root: str, world: int) -> int:
    """train=accuracy: root/val/<class>/ with train/'s classes, and at least one image per rank
    (each rank evaluates its own slice)."""
    val, train = Path(root) / "val", Path(root) / "train"
    if not val.is_dir():
        raise ConfigError(f"data.root={root} has no val/ folder; train=accuracy evaluates on val/<class>/*.JPEG "
                          "with the same class folders as train/")
    names = {split: sorted(d.name for d in os.scandir(split) if d.is_dir()) for split in (train, val)}
    if names[train] != names[val]:
        missing, extra = sorted(set(names[train]) - set(names[val])), sorted(set(names[val]) - set(names[train]))
        what = "; ".join(filter(None, [f"missing in val/: {', '.join(missing[:3])}" if missing else "",
                                       f"not in train/: {', '.join(extra[:3])}" if extra else ""]))
        raise ConfigError(f"data.root={root}: val/ classes differ from train/ ({what}); labels are the sorted "
                          "class folder names, so both need the same folders")
    images = images_under(val)
    if images < world:
        raise ConfigError(f"data.root={root}: val/ has {images} images, fewer than the {world} ranks that "
                          "each evaluate a slice of it; add images or use fewer processes")
    return images
