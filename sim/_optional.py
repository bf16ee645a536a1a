"""Optional dependencies, imported when first needed, with the install line when missing."""
from __future__ import annotations

from importlib import import_module

from .errors import ConfigError


def require(module: str, extra: str):
    """Import ``module`` or raise ConfigError naming the extra that installs it."""
    try:
        return import_module(module)
    except ImportError:
        raise ConfigError(f"this needs {module}, which is not installed: "
                          f"pip install 'clustersim[{extra}]'") from None
