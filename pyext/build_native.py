"""cffi build script (API mode) for all C kernels in csrc/.

Every public header csrc/sk_*.h is both #included by the C sources and handed to
cffi's cdef, so each type and function is declared exactly once.  Lines that start
with '#' (include guards, includes) are dropped before cdef, which cannot parse them.
The compiled module is ``sim._sk_native``; only ``sim/_native.py`` imports it.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import warnings
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


_OPENMP_PROBE = "#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n"


def _compiler() -> list[str]:
    """The C compiler setuptools will use: $CC, else the one Python was built with."""
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def openmp_flags() -> list[str]:
    """["-fopenmp"] if the compiler builds and links an OpenMP program, else [] with a warning.

    Apple clang has no -fopenmp: the kernels are then built without OpenMP and run on one
    thread (the ``threads`` arguments are accepted and ignored).  CLUSTERSIM_NO_OPENMP=1 skips it.
    """
    if os.environ.get("CLUSTERSIM_NO_OPENMP") == "1" or sys.platform == "win32":
        return []
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(_OPENMP_PROBE)
        try:
            ok = subprocess.run([*_compiler(), "-fopenmp", str(src), "-o", str(Path(tmp) / "probe")],
                                capture_output=True).returncode == 0
        except OSError:
            ok = False
    if not ok:
        warnings.warn("clustersim: the C compiler cannot build OpenMP programs (-fopenmp); building "
                      "the kernels without OpenMP: they run on one thread", stacklevel=1)
        return []
    return ["-fopenmp"]


def _compile_args() -> tuple[list[str], list[str]]:
    args = ["-std=c99", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter",
            "-ffp-contract=off", "-fno-math-errno"]
    link: list[str] = []
    omp = openmp_flags()
    args += omp
    link += omp
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
