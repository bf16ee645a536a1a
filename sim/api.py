"""The notebook API: one call from names to a result, and policies compared as a DataFrame.

>>> import sim
>>> table = sim.compare("gavel-108", "generate", ["fifo", "tiresias"], seeds=[0, 1], jobs=20)
>>> table[["policy", "seed", "n_jobs"]].values.tolist()
[['fifo', 0, 20], ['tiresias', 0, 20], ['fifo', 1, 20], ['tiresias', 1, 20]]

Clusters are a :class:`~sim.cluster.Cluster` or anything :func:`sim.presets.load_cluster` takes
(a preset name, ``uniform:nodes=N,gpus=G``, a TOML path); policies a name (built with
:func:`sim.policies.get_policy`) or a :class:`~sim.policies.Policy` instance (copied for each run,
so runs never share its state); the oracle defaults to the built-in throughput table.
"""
from __future__ import annotations

import copy
import os
from typing import Iterable, Sequence

from ._optional import require
from .cluster import Cluster
from .engine import EngineConfig
from .engine import simulate as _simulate
from .errors import ConfigError
from .jobs import JobTable
from .metrics import SUMMARY_KEYS, summary
from .policies import Policy, get_policy
from .presets import load_cluster
from .result import SimResult
from .scenario import DEFAULT_LOAD
from .throughput import default_oracle
from .workload import generate_workload

__all__ = ["simulate", "compare"]


def simulate(cluster: Cluster | str | os.PathLike, jobs: JobTable | str | os.PathLike,
             policy: Policy | str, oracle=None, config: EngineConfig | None = None,
             **policy_params) -> SimResult:
    """Run one policy on one cluster and workload.

    ``jobs``: a :class:`~sim.jobs.JobTable` or a trace file (see :func:`compare`);
    ``policy_params`` go to :func:`~sim.policies.get_policy` when ``policy`` is a name.
    """
    c = _cluster(cluster)
    table, oracle = _load_jobs(jobs, c, oracle)
    return _simulate(c, table, _policy(policy, policy_params), oracle, config)


def compare(cluster: Cluster | str | os.PathLike, workload: JobTable | str | os.PathLike,
            policies: Iterable[Policy | str], seeds: Sequence[int] | None = None, *, oracle=None,
            config: EngineConfig | None = None, trace_format: str | None = None,
            **generator_options):
    """Run every policy on every seed's workload; a pandas DataFrame with one row per (policy, seed).

    Columns: ``policy``, ``seed`` and the summary metrics (:data:`sim.metrics.SUMMARY_KEYS`).
    ``workload``: ``"generate"`` draws one workload per seed (default seeds ``[0]``) with
    :func:`sim.workload.generate_workload`, whose options are the keywords (``jobs`` for the
    count and ``load`` for jobs per hour, default 6; ``sizes``, ``durations``, ... as there);
    else a :class:`~sim.jobs.JobTable` or a file in any format :func:`sim.traces.read_trace`
    reads (``trace_format`` forces one; trace jobs run their recorded times unless ``oracle`` is
    given), run once (``seeds`` must then be None).
    """
    pd = require("pandas", "pandas")
    c = _cluster(cluster)
    policies = list(policies)
    if not policies:
        raise ConfigError("compare: no policies")
    rows = []
    for seed, table, run_oracle in _workloads(workload, c, seeds, oracle, trace_format, generator_options):
        for p in policies:
            result = _simulate(c, table, _policy(p, {}), run_oracle, config)
            rows.append({"policy": result.policy, "seed": seed, **summary(result)})
    return pd.DataFrame(rows, columns=["policy", "seed", *SUMMARY_KEYS])


def _cluster(cluster) -> Cluster:
    return cluster if isinstance(cluster, Cluster) else load_cluster(cluster)


def _policy(policy, params: dict) -> Policy:
    if isinstance(policy, str):
        return get_policy(policy, **params)
    if params:
        raise ConfigError("policy parameters go with a policy name, not an instance")
    if not isinstance(policy, Policy):
        raise ConfigError(f"a policy is a name or a sim.policies.Policy, not {type(policy).__name__}")
    return copy.deepcopy(policy)


def _workloads(workload, cluster: Cluster, seeds, oracle, trace_format, options):
    """(seed, JobTable, oracle) per run."""
    if isinstance(workload, str) and workload == "generate":
        oracle = oracle or default_oracle()
        n, load = options.pop("jobs", 300), options.pop("load", DEFAULT_LOAD)
        for seed in (0,) if seeds is None else seeds:
            yield seed, generate_workload(n, load, seed, throughput=oracle, **options), oracle
        return
    if options or seeds is not None:
        raise ConfigError("seeds and generator options apply to workload='generate' only; "
                          f"got seeds={seeds!r}, options {sorted(options)}")
    table, oracle = _load_jobs(workload, cluster, oracle, trace_format)
    yield None, table, oracle


def _load_jobs(jobs, cluster: Cluster, oracle, trace_format: str | None = None):
    """A JobTable and the oracle to run it with."""
    if isinstance(jobs, JobTable):
        return jobs, oracle or default_oracle()
    if not isinstance(jobs, (str, os.PathLike)):
        raise ConfigError(f"jobs must be a JobTable or a path, not {type(jobs).__name__}")
    from .goodput.workload import is_pollux_workload, read_goodput_workload
    if trace_format is None and is_pollux_workload(jobs):
        # a Pollux/Sia workload runs on its goodput profiles, as `clustersim run` does
        table, goodput_oracle = read_goodput_workload(jobs)
        return table, oracle or goodput_oracle
    from .traces import read_workload
    return read_workload(jobs, cluster, format=trace_format, oracle=oracle)
