"""Silence C-level output that a library prints past its own switches.

HiGHS 1.12 (scipy 1.17's vendored copy) prints a debug line from C++,
``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();``, even with
``output_flag`` off (ERGO-Code/HiGHS#2783).  A run that writes its results to stdout must not
carry it, so every MIP solve runs inside :func:`quiet_stdout`.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager


@contextmanager
def quiet_stdout():
    """Route file descriptor 1 to /dev/null while the block runs (single-threaded callers)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):       # captured stdout: nothing to silence
        yield
        return
    sys.stdout.flush()
    saved, null = os.dup(fd), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)
        os.close(null)
