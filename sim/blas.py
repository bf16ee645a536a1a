"""One BLAS thread for small dense fits (a 7-parameter least squares runs far faster on one).

``threadpoolctl.threadpool_limits`` scans every loaded shared library at each call (about 4 ms
here: a Sia run makes thousands of online fits, and the scans were a fifth of its CPU time), so
the libraries are found once, by one :class:`threadpoolctl.ThreadpoolController` made at first
use (after numpy and scipy have loaded theirs), and each fit only sets and restores the limit.
"""
from __future__ import annotations

from threadpoolctl import ThreadpoolController

_controller: ThreadpoolController | None = None


def one_blas_thread():
    """A context manager: the loaded BLAS libraries on one thread while the block runs."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")
