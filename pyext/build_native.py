"""cffi build script (API mode) for all C kernels in csrc/.

Every public header csrc/sk_*.h is both #included by the C sources and handed to
cffi's cdef, so each type and function is declared exactly once.  Lines that start
with '#' (include guards, includes) are dropped before cdef, which cannot parse them.
The compiled module is ``sim._sk_native``; only ``sim/_native.py`` imports it.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"


def _public_headers() -> list[Path]:
    return sorted(CSRC.glob("sk_*.h"))


def _cdef_text(header: Path) -> str:
    lines = []
    for line in header.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        lines.append(line)
    return "\n".join(lines)


def _compile_args() -> tuple[list[str], list[str]]:
    args = ["-std=c99", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter",
            "-ffp-contract=off", "-fno-math-errno"]
    link: list[str] = []
    if sys.platform != "win32" and os.environ.get("CLUSTERSIM_NO_OPENMP") != "1":
        args.append("-fopenmp")
        link.append("-fopenmp")
    extra = os.environ.get("CLUSTERSIM_CFLAGS")
    if extra:
        args += extra.split()
        link += extra.split()
    return args, link


ffibuilder = FFI()
for _h in _public_headers():
    ffibuilder.cdef(_cdef_text(_h))

_cargs, _largs = _compile_args()
ffibuilder.set_source(
    "sim._sk_native",
    "\n".join(f'#include "{h.name}"' for h in _public_headers()),
    sources=[str(p.relative_to(ROOT)) for p in sorted(CSRC.glob("*.c"))],
    include_dirs=[str(CSRC.relative_to(ROOT))],
    extra_compile_args=_cargs,
    extra_link_args=_largs,
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
