"""Scheduling policies, registered by name.

``get_policy("fifo")`` builds one; ``list_policies()`` says what exists.  To add
a policy, subclass :class:`sim.policies.base.Policy`, give it a ``name`` and
decorate it with :func:`register` (see ARCHITECTURE.md).
"""
from __future__ import annotations

from ..errors import ConfigError
from .base import Policy

_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    if not cls.name:
        raise ConfigError(f"{cls.__name__} has no name")
    old = _REGISTRY.get(cls.name)
    reloaded = old is not None and (old.__module__, old.__qualname__) == (cls.__module__, cls.__qualname__)
    if old is not None and old is not cls and not reloaded:
        raise ConfigError(f"policy name {cls.name!r} is already registered by "
                          f"{old.__module__}.{old.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def get_policy(name: str, **params) -> Policy:
    _load_builtins()
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown policy {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"policy {name!r}: bad parameters {params}: {exc}") from None


def list_policies() -> dict[str, str]:
    _load_builtins()
    return {n: c.description for n, c in sorted(_REGISTRY.items())}


def _load_builtins() -> None:
    from . import eghs, gavel, queue, tiresias  # noqa: F401  (registration side effect)


__all__ = ["Policy", "register", "get_policy", "list_policies"]
