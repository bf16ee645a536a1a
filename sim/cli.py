"""The ``clustersim`` command.

Each sub-command lives in its own module in :mod:`sim.commands` and defines
``register(subparsers)``, which adds its parser and sets ``func`` (a callable
taking the parsed arguments).  Modules there are discovered automatically.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands
from ._version import version
from .errors import SimError


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help texts end with the option's default, unless they say it already or there is none."""

    def _get_help_string(self, action):
        text = action.help or ""
        none = action.default is None or action.default is False or action.default == []
        if none or "default" in text:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """Every parser, sub-commands' included (argparse makes them of the parent's class)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="clustersim", description="Simulate GPU clusters and their schedulers.")
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    args.argv = ["clustersim"] + argv      # the command as typed, for provenance records
    try:
        args.func(args)
    except SimError as exc:
        print(f"clustersim: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
