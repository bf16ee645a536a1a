"""Hops (paper 3, SoCC'24; algorithms.md §4): the parts of the ``hops`` policy.

* :mod:`.servers`    hidden per-server speeds and per-(job, server) data loading; the monitor
* :mod:`.estimator`  the three-layer throughput estimator
* :mod:`.priority`   latency ratio and the pluggable LAS/SJF/SRTF/FTF priorities
* :mod:`.window`     service window and sensitivity adjustment
* :mod:`.configs`    requirement sets, placement sensitivity, configuration generation
* :mod:`.ilp`        the prior-weighted ILP on HiGHS
* :mod:`.metrics`    max LR, RAQLR, fragments per round, FTF rho
"""
