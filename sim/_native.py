"""The one import point of the compiled C kernels (module ``sim._sk_native``).

Every other module gets ``ffi`` and ``lib`` from here, reads the C constants from ``lib``
(never copies them), and turns C error codes into exceptions with :func:`check`, the one
error convention of every kernel: C kernels never abort or print; they return a negative
``SK_E*`` code and, where they have a context, a message that :func:`check` reads only when
the code is an error.  A stall (``SK_ESTALL``: the simulated jobs cannot progress) is the
simulated system's fault, not the kernel's, and raises :class:`SimError`; every other
negative code raises :class:`KernelError` carrying the code.
"""
from __future__ import annotations

from typing import Callable

from .errors import KernelError, SimError

try:
    from ._sk_native import ffi, lib  # type: ignore[attr-defined]
except ImportError as exc:  # pragma: no cover - only on a broken install
    raise ImportError(
        "clustersim's C extension (sim._sk_native) is not built; install the package "
        "with `pip install .` from the project root"
    ) from exc

__all__ = ["ffi", "lib", "check", "as_cdata"]


def check(code: int, what: str, message: str | Callable[[], str] | None = None) -> int:
    """Return ``code`` if it is not an error, else raise (see the module docstring).

    ``what`` names the C function; ``message`` is the kernel's message, or a function that
    reads it (called only on an error).
    """
    if code >= 0:
        return code
    text = message() if callable(message) else message
    if code == lib.SK_ESTALL:
        raise SimError(f"{what}: {text}" if text else f"{what}: the run stalled")
    detail = f": {text}" if text else ""
    raise KernelError(f"{what} failed (code {code}){detail}", code)


def as_cdata(ctype: str, array):
    """Zero-copy pointer to a C-contiguous numpy array (caller keeps it alive)."""
    if not array.flags["C_CONTIGUOUS"]:
        raise ValueError(f"{ctype} buffer must be C-contiguous")
    return ffi.cast(ctype, ffi.from_buffer(array, require_writable=False))
