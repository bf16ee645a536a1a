"""The policy registry: policies by name, and discovery of the built-in ones.

Every module of the ``sim.policies`` package is a candidate: the first lookup imports them all
(in name order, so registration is deterministic) and each registers its classes with
:func:`register`.  The registry never names its modules, so a new policy module needs no edit
here, and no policy module is imported by the registry at import time.
"""
from __future__ import annotations

import pkgutil
from importlib import import_module
from pathlib import Path

from ..errors import ConfigError
from .base import Policy

_REGISTRY: dict[str, type[Policy]] = {}
_PACKAGE = __name__.rpartition(".")[0]
_discovered = False


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make ``cls`` available as ``get_policy(cls.name)``."""
    if not cls.name:
        raise ConfigError(f"{cls.__name__} has no name")
    old = _REGISTRY.get(cls.name)
    reloaded = old is not None and (old.__module__, old.__qualname__) == (cls.__module__, cls.__qualname__)
    if old is not None and old is not cls and not reloaded:
        raise ConfigError(f"policy name {cls.name!r} is already registered by "
                          f"{old.__module__}.{old.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def builtin_modules() -> list[str]:
    """Full names of the package's public modules, sorted."""
    here = str(Path(__file__).resolve().parent)
    return sorted(f"{_PACKAGE}.{m.name}" for m in pkgutil.iter_modules([here])
                  if not m.name.startswith("_"))


def _discover() -> None:
    global _discovered
    if not _discovered:
        for name in builtin_modules():
            import_module(name)
        _discovered = True


def get_policy(name: str, **params) -> Policy:
    """A new instance of the policy registered as ``name``, built with ``params``."""
    _discover()
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown policy {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"policy {name!r}: bad parameters {params}: {exc}") from None


def list_policies() -> dict[str, str]:
    """Policy name -> one-line description, sorted by name."""
    _discover()
    return {n: c.description for n, c in sorted(_REGISTRY.items())}
