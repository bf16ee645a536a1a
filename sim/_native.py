"""The one import point of the compiled C kernels (module ``sim._sk_native``).

Every other module gets ``ffi`` and ``lib`` from here and turns C error codes into
exceptions with :func:`check`.  C kernels never abort or print: they return a
negative ``SK_E*`` code and, where they have a context, a message.
"""
from __future__ import annotations

from .errors import KernelError

try:
    from ._sk_native import ffi, lib  # type: ignore[attr-defined]
except ImportError as exc:  # pragma: no cover - only on a broken install
    raise ImportError(
        "clustersim's C extension (sim._sk_native) is not built; install the package "
        "with `pip install .` from the project root"
    ) from exc

__all__ = ["ffi", "lib", "check", "as_cdata"]


def check(code: int, what: str, message: str | None = None) -> int:
    """Return ``code`` if it is not an error, else raise KernelError."""
    if code < 0:
        detail = f": {message}" if message else ""
        raise KernelError(f"{what} failed with code {code}{detail}", code)
    return code


def as_cdata(ctype: str, array):
    """Zero-copy pointer to a C-contiguous numpy array (caller keeps it alive)."""
    if not array.flags["C_CONTIGUOUS"]:
        raise ValueError(f"{ctype} buffer must be C-contiguous")
    return ffi.cast(ctype, ffi.from_buffer(array, require_writable=False))
