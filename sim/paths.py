"""Where bundled data lives, in a source checkout and after a non-editable install.

In a checkout the data sits at the repository top level (`hwprofiles/`, `workloads/`);
in a wheel it is force-included under `sim/_bundled/` (see pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def bundled_dir(name: str) -> Path:
    """Return the directory of bundled data `name` ("hwprofiles" or "workloads")."""
    installed = _PACKAGE_DIR / "_bundled" / name
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / name


def model_specs_dir() -> Path:
    """Model architecture YAMLs ship inside the package itself."""
    return _PACKAGE_DIR / "specs" / "models"
