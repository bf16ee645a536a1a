"""Typed errors.  Every error raised on bad input names where it came from."""
from __future__ import annotations


class SimError(Exception):
    """Base class; also raised for an invalid simulator state."""


class ConfigError(SimError):
    """A bad cluster, workload, policy or command-line setting."""


class TraceError(SimError):
    """A bad row or field in an input file.  Carries file, row and field."""

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None,
                 field: str | None = None):
        self.file, self.row, self.field = file, row, field
        self.message = message          # without the location prefix
        where = []
        if file is not None:
            where.append(f"file {file}")
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class KernelError(SimError):
    """A C kernel returned an error code."""

    def __init__(self, message: str, code: int = -1):
        self.code = code
        super().__init__(message)
