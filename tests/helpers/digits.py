"""scikit-learn's 8x8 digits (in its wheel: no download) as an ImageFolder tree, and the
train=accuracy run that learns them: the training runs of tests/e2e use both."""

from pathlib import Path

# resnet18 at 32 px on 1,437 training digits, fp32, NCHW (channels_last is ~4x slower on CPUs), batch 16:
# 5 epochs of the recipe reach 0.91 top-1 on torch 2.14.1 (0.87 after epoch 3). Batch 32 needs 8 epochs
# for 0.886 (6 gave 0.836): twice the updates an epoch learn in fewer epochs, at about the same cost.
EPOCHS = 5
DIGITS_RUN = ["train=accuracy", "model=resnet18", "model.num_classes=10", "model.channels_last=false",
              "data=imagefolder", "data.image_size=32", "data.batch_size=16", "data.num_workers=1",
              "precision=fp32", "dist.accelerator=cpu", f"train.epochs={EPOCHS}", "train.lr_warmup_epochs=1"]


def write_digits(root: Path, size: int = 32, val_every: int = 5) -> Path:
    """sklearn's 1,797 digits as root/{train,val}/digitN/*.png, upscaled to size px; every
    val_every-th image is held out for validation."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for i, (pixels, label) in enumerate(zip(digits.images, digits.target)):
        folder = root / ("val" if i % val_every == 0 else "train") / f"digit{label}"
        folder.mkdir(parents=True, exist_ok=True)
        image = Image.fromarray((pixels * (255 / 16)).astype(np.uint8)).convert("RGB")
        image.resize((size, size), Image.BILINEAR).save(folder / f"{i}.png")
    return root
