"""The package version: the installed distribution's, else the one in pyproject.toml."""
from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def version() -> str:
    try:
        return metadata.version("clustersim")
    except metadata.PackageNotFoundError:
        return pyproject_version(_PYPROJECT)


def pyproject_version(path: Path) -> str:
    """``version = "..."`` of the ``[project]`` table, or "0+unknown"."""
    try:
        text = path.read_text()
    except OSError:
        return "0+unknown"
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = project and re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.M)
    return found.group(1) if found else "0+unknown"
