"""File input and output with clear errors: text files read as UTF-8 with the failure named,
and outputs written atomically (a temporary file in the same folder, then ``os.replace``), so a
full disk or an interrupt never leaves a truncated result under the final name."""
from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path
from typing import Iterator

from .errors import ConfigError

_UMASK = os.umask(0o022)
os.umask(_UMASK)

__all__ = ["read_text_file", "atomic_path", "atomic_write_text", "ensure_out_dir", "os_error_text",
           "stdout_to_stderr"]


def os_error_text(exc: OSError) -> str:
    """``strerror: filename`` of an OSError (one line, no errno prefix)."""
    what = exc.strerror or type(exc).__name__
    name = exc.filename
    return f"{what}: {name}" if name else what


def read_text_file(path, what: str) -> str:
    """The UTF-8 text of ``path``; ConfigError naming ``what`` and the file otherwise."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a directory, expected a file") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read: {os_error_text(exc)}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{what} {path}: not UTF-8 text (byte {exc.start}, line {line}): "
                          f"a binary file?") from None


def ensure_out_dir(path, what: str = "--out") -> Path:
    """Create the output folder ``path`` (and parents); ConfigError if it is a file or not
    writable, before any work is done."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot create the folder: {os_error_text(exc)}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path}: the folder is not writable")
    return path


@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
    """Yields a temporary path next to ``path`` (same suffix) to write; on success it replaces
    ``path`` in one step, on any error it is removed and ``path`` is untouched."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"output {path} is a directory, expected a file")
    if not path.parent.is_dir():
        raise ConfigError(f"output {path}: the folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)      # as a plain open() would create it
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


class CheckedUtf8(io.RawIOBase):
    """The bytes of a text file as pyarrow reads them, with the lines that are not valid UTF-8
    found and their bad bytes replaced (U+FFFD), so one such line is a row-level problem (named
    by its line, skippable) instead of a failure of the whole block.  Line breaks are kept, so
    physical line numbers do not change.  ``bad_lines`` lists the 1-based lines found so far."""

    def __init__(self, path: Path, chunk: int = 1 << 22):
        super().__init__()
        self._f = open(path, "rb")
        self._chunk = chunk
        self._carry = b""
        self._buf = memoryview(b"")
        self._line = 1
        self.bad_lines: list[int] = []

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._f.close()
        super().close()

    def readinto(self, b) -> int:
        while not len(self._buf):
            chunk = self._f.read(self._chunk)
            if not chunk and not self._carry:
                return 0
            data = self._carry + chunk
            cut = data.rfind(b"\n") + 1 if chunk else len(data)   # whole lines, all at the end
            if cut == 0:                    # no line end yet: read on
                self._carry = data
                continue
            self._carry = data[cut:]
            self._buf = memoryview(self._clean(data[:cut]))
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def _clean(self, data: bytes) -> bytes:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            pieces = data.split(b"\n")
            for k, piece in enumerate(pieces):
                try:
                    piece.decode("utf-8")
                except UnicodeDecodeError:
                    self.bad_lines.append(self._line + k)
                    pieces[k] = piece.decode("utf-8", "replace").encode("utf-8")
            data = b"\n".join(pieces)
        self._line += data.count(b"\n")
        return data


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send whatever is written to file descriptor 1 inside the block to stderr instead.

    Solver libraries print from C (HiGHS's MIP solver writes progress lines with ``printf``
    whatever its output options), which would corrupt ``--format json`` or ``csv`` on stdout;
    the CLI runs policies inside this block and writes its results after it.  A no-op when
    stdout has no file descriptor (e.g. captured by a test harness)."""
    import sys
    try:
        fd, err = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        os.dup2(err, fd)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)
