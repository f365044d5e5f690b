"""Where Hydra finds rn50's configs, in a checkout and in an installed wheel."""

from pathlib import Path


def config_dir() -> str:
    """conf/ beside the package in a checkout (and editable installs); rn50/conf in a wheel.

    pyproject.toml puts conf/ into the wheel as rn50/conf, so a plain `pip install` (an offline
    wheelhouse's included) has the configs too; `../conf` would point into site-packages.
    """
    package = Path(__file__).resolve().parent.parent  # rn50/, above this config/ package
    for candidate in (package / "conf", package.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return str(candidate)
    return str(package.parent / "conf")  # missing: Hydra's error names this folder
