"""TLA+ specifications of the ownership protocols and the model-checker front (embedded and TLC)."""

from importlib import resources
from pathlib import Path


def spec_dir() -> Path:
    """Folder holding the shipped ``.tla``/``.cfg`` files, from an installed copy or the source tree."""
    return Path(str(resources.files(__name__)))

# Files the distribution must ship (relative to spec_dir()); each spec issue appends its models.
SHIPPED_MODELS: tuple[str, ...] = ()
