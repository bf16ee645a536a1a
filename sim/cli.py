"""The ``clustersim`` command.

Each sub-command lives in its own module in :mod:`sim.commands` (``COMMANDS`` there names
them) and defines ``register(subparsers)``, which adds its parser and sets ``func`` (a callable
taking the parsed arguments).  Only the module of the command typed is imported; the others
are listed by their one-line help.

:func:`main` is the one error boundary: a :class:`~sim.errors.SimError` (bad input), an
``OSError`` (missing file, full disk, read-only folder), a decode error and Ctrl-C each end
the command with one line on stderr and an exit code (:data:`EXIT_CODES`), never a traceback;
a closed output pipe (``clustersim trace stats ... | head``) ends it quietly.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from . import commands
from ._version import version
from .errors import SimError
from .limits import clip

#: exit status by outcome
EXIT_CODES = {"ok": 0, "error": 2, "os": 1, "interrupt": 130}
_MESSAGE_LIMIT = 2000       # characters of an error message echoed (bad input can be huge)


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


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser with the typed command's options; every other command is listed by name and
    help only (the top level takes no option with a value, so the first word is the command)."""
    p = _Parser(prog="clustersim", description="Simulate GPU clusters and their schedulers.")
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    typed = next((a for a in argv if not a.startswith("-")), None)
    if typed in commands.COMMANDS:
        module = commands.COMMANDS[typed][0]
        importlib.import_module(f"{commands.__name__}.{module}").register(sub)
    for name in commands.COMMANDS:
        if name not in sub.choices:
            sub.add_parser(name, help=commands.help_line(name))
    return p


def _say(message: str) -> None:
    print(f"clustersim: error: {clip(str(message), _MESSAGE_LIMIT)}", file=sys.stderr, flush=True)


def _interrupted(exc: BaseException) -> bool:
    """True for Ctrl-C, also when compiled (Numba) code surfaced it as a SystemError."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _os_error(exc: OSError) -> str:
    from .fsio import os_error_text
    return os_error_text(exc)


_python_showwarning = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """The project's own warnings as one line (``clustersim: warning: ...``); others as Python's."""
    if category.__module__.split(".")[0] != "sim":
        _python_showwarning(message, category, filename, lineno, file, line)
        return
    print(f"clustersim: warning: {clip(str(message), _MESSAGE_LIMIT)}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser(argv).parse_args(argv)
        args.argv = ["clustersim"] + argv      # the command as typed, for provenance records
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            args.func(args)
        sys.stdout.flush()                     # a closed pipe shows here, not at exit
    except SimError as exc:
        _say(str(exc))
        return EXIT_CODES["error"]
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_CODES["ok"]
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_CODES["interrupt"]
    except UnicodeError as exc:
        _say(f"not UTF-8 text: {exc}")
        return EXIT_CODES["error"]
    except OSError as exc:
        _say(_os_error(exc))
        return EXIT_CODES["os"]
    except SystemError as exc:
        if not _interrupted(exc):
            raise
        _say("interrupted")
        return EXIT_CODES["interrupt"]
    return EXIT_CODES["ok"]


if __name__ == "__main__":
    sys.exit(main())
