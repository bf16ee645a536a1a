"""The policy registry: policies by name, and where they come from.

Three sources, all registering their classes with :func:`register`:

* built-in: every module of the ``sim.policies`` package; the first lookup imports them all
  (in name order, so registration is deterministic).  The registry never names its modules,
  so a new policy module needs no edit here;
* installed: the entry points of the group ``clustersim.policies`` (:data:`ENTRY_POINT_GROUP`),
  loaded at the first lookup after the built-in ones.  An entry point names a module that
  registers its policies (``myplugin.policies``) or a Policy class (``myplugin:MyPolicy``),
  registered for it.  One that fails to load is a warning, not the end of every run;
* a file: :func:`load_policy_file` runs a Python file that registers policies
  (``clustersim run --policy-file FILE.py``).
"""
from __future__ import annotations

import hashlib
import importlib.util
import pkgutil
import sys
import warnings
from importlib import import_module, metadata
from pathlib import Path

from ..errors import ConfigError
from .base import Policy

_REGISTRY: dict[str, type[Policy]] = {}
_PACKAGE = __name__.rpartition(".")[0]
_discovered = False
#: the entry-point group of installed policies
ENTRY_POINT_GROUP = "clustersim.policies"


class PluginWarning(UserWarning):
    """An installed policy entry point that could not be loaded."""


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make ``cls`` available as ``get_policy(cls.name)``."""
    if not cls.name:
        raise ConfigError(f"{cls.__name__} has no name")
    old = _REGISTRY.get(cls.name)
    reloaded = old is not None and _origin(old) == _origin(cls)
    if old is not None and old is not cls and not reloaded:
        raise ConfigError(f"policy name {cls.name!r} is already registered by "
                          f"{old.__module__}.{old.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def _origin(cls: type) -> tuple:
    """Where a class is defined: the file of its methods' code (else its module's name) and its
    qualified name; the same class loaded again (a reload, one file under two module names)
    has the same origin."""
    files = [f.__code__.co_filename for f in vars(cls).values() if hasattr(f, "__code__")]
    return (str(Path(files[0]).resolve()) if files else cls.__module__, cls.__qualname__)


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
        load_entry_points()


def load_entry_points(group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Load the installed policies of ``group``; returns the entry points' names loaded."""
    loaded = []
    for ep in metadata.entry_points(group=group):
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not stop other runs
            warnings.warn(f"policy entry point {ep.name} = {ep.value} ({group}) failed to load: "
                          f"{type(exc).__name__}: {exc}", PluginWarning, stacklevel=2)
            continue
        if isinstance(obj, type) and issubclass(obj, Policy):
            register(obj)
        loaded.append(ep.name)
    return loaded


def load_policy_file(path) -> list[str]:
    """Run the Python file ``path`` as a module (which registers its policies with
    :func:`register`); returns the names of the policies it registered, sorted."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"policy file {path} does not exist")
    _discover()
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    module_name = f"clustersim_policy_file_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"policy file {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    before = dict(_REGISTRY)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(module_name, None)
        if isinstance(exc, SyntaxError):
            raise ConfigError(f"policy file {path}: {exc}") from None
        raise
    return sorted(n for n, c in _REGISTRY.items() if before.get(n) is not c)


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
