"""Preloaded by the local pool's forkserver: runs one tiny simulation on import, so the worker
processes forked from the server inherit loaded Numba kernels instead of each loading them
(about a second per worker).  Nothing else imports this module."""
from __future__ import annotations


def warm() -> None:
    from ..engine import simulate
    from ..policies import get_policy
    from ..cluster import uniform_cluster
    from ..workload import generate_workload
    from .cells import _oracle

    oracle = _oracle()
    cluster = uniform_cluster(2, 4)
    jobs = generate_workload(8, 60.0, 0, throughput=oracle)
    for name in ("fifo", "srtf"):
        simulate(cluster, jobs, get_policy(name), oracle)


try:
    warm()
except Exception:  # noqa: BLE001  (warming is an optimization; a cell will report real errors)
    pass
