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

import numpy as np

from .errors import KernelError, SimError

try:
    from ._sk_native import ffi, lib  # type: ignore[attr-defined]
except ImportError as exc:  # pragma: no cover - only on a broken install
    raise ImportError(
        "clustersim's C extension (sim._sk_native) is not built; install the package "
        "with `pip install .` from the project root"
    ) from exc

__all__ = ["ffi", "lib", "check", "as_cdata", "pointer", "DecisionRecords"]


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


_POINTER = {"<i8": "int64_t *", "<i4": "int32_t *", "<f8": "double *", "|i1": "int8_t *",
            "|b1": "int8_t *"}


def pointer(array: np.ndarray):
    """:func:`as_cdata` with the C type of the array's dtype (int64, int32, float64, int8, bool)."""
    return as_cdata(_POINTER[array.dtype.str], array)


class DecisionRecords:
    """The record buffers (``sk_decision_records``, ``rows`` rows) a deciding kernel writes one
    row per decision point into: :meth:`drain` keeps the rows written so far."""

    def __init__(self, rows: int):
        self.arrays = {"time": np.empty(rows), "used_gpus": np.empty(rows, np.int64),
                       "queued": np.empty(rows, np.int64), "running": np.empty(rows, np.int64),
                       "fgd": np.empty(rows), "kind": np.empty(rows, np.int32),
                       "seconds": np.empty(rows)}
        self.struct = ffi.new("sk_decision_records *")
        self.struct.cap = rows
        for key, arr in self.arrays.items():
            setattr(self.struct, key, pointer(arr))
        self.chunks: list[dict[str, np.ndarray]] = []

    def drain(self) -> None:
        """Keep the rows the kernel wrote and let it write from the start again."""
        n = self.struct.n
        if n:
            self.chunks.append({key: arr[:n].copy() for key, arr in self.arrays.items()})
        self.struct.n = 0

    def records(self) -> dict[str, np.ndarray]:
        """Every row kept, one array per field."""
        if not self.chunks:
            return {key: arr[:0].copy() for key, arr in self.arrays.items()}
        return {key: np.concatenate([c[key] for c in self.chunks]) for key in self.arrays}
