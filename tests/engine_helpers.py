"""Small fixtures shared by the engine tests: a hand-checkable oracle and job specs."""
from __future__ import annotations

import numpy as np

from sim.cluster import DEFAULT_INTER_BW_GBPS, DEFAULT_INTRA_BW_GBPS, Cluster
from sim.state import JobSpecs


#: parameters that keep a policy's search small enough for the many tiny runs of the tests that
#: run every policy (its full search is tested in its own file: tests/test_pollux*.py)
SMALL_SEARCH = {"pollux-learning": {"population": 4, "generations": 2}}


def small_policy(name: str, **params):
    """``get_policy(name, **params)`` with :data:`SMALL_SEARCH` for the policies it names."""
    from sim.policies import get_policy
    return get_policy(name, **{**SMALL_SEARCH.get(name, {}), **params})


class LinearOracle:
    """rate = GPUs x per-type speed x slowest server speed x (0.8 if spread).

    Simple enough to work out results by hand; the slowest-worker rule holds.
    """

    models = ("m0", "m1")
    type_speed = {"fast": 2.0, "slow": 1.0}

    def rates(self, model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types):
        speeds = np.array([self.type_speed[t] for t in cluster_types])
        slowest = np.full(len(ngpu), np.inf)
        for t, s in enumerate(speeds):
            uses = (np.asarray(type_mask) >> t) & 1 == 1
            slowest = np.where(uses, np.minimum(slowest, s), slowest)
        spread = np.where(np.asarray(n_nodes) > 1, 0.8, 1.0)
        model_factor = np.where(np.asarray(model_idx) == 1, 0.5, 1.0)
        ngpu = np.asarray(ngpu, float)
        rate = ngpu * np.where(ngpu > 0, slowest, 0.0) * np.asarray(min_speed) * spread * model_factor
        return rate

    def reference_rate(self, model_idx, ngpu):
        return np.asarray(ngpu, float) * np.where(np.asarray(model_idx) == 1, 0.5, 1.0)

    def pair_rates(self, model_a, model_b, ngpu, cluster_types):
        """Co-location (space sharing): the first job of a pair keeps 70% of its consolidated
        rate, the second 50%; [n, types, 2]."""
        a, b, k = np.broadcast_arrays(np.asarray(model_a), np.asarray(model_b), np.asarray(ngpu))
        a, b, k = a.ravel(), b.ravel(), k.ravel()
        out = np.empty((a.size, len(cluster_types), 2))
        for t, name in enumerate(cluster_types):
            one = np.full(a.size, 1 << t)
            for m, (model, share) in enumerate(((a, 0.7), (b, 0.5))):
                out[:, t, m] = share * self.rates(model, k, np.ones(a.size), one, np.ones(a.size),
                                                  cluster_types)
        return out

    def restart_delay_s(self, model):
        return 10.0


class NetworkOracle(LinearOracle):
    """LinearOracle whose rates hold the default bandwidths: on a cluster with others the engine
    replaces its ring all-reduce term (sim.network; models m0/m1 all-reduce the default
    gradient size)."""

    reference_bandwidth_gbps = (DEFAULT_INTRA_BW_GBPS, DEFAULT_INTER_BW_GBPS)


def small_cluster(gpus=(4, 4, 2), types=(0, 1, 1), speed=(1.0, 1.0, 0.5),
                  bandwidths=((DEFAULT_INTRA_BW_GBPS, DEFAULT_INTER_BW_GBPS),) * 2) -> Cluster:
    """``bandwidths``: (intra, inter) Gbit/s per GPU type (fast, slow); default: the defaults."""
    bw = np.asarray(bandwidths, float)[np.asarray(types, np.int64)]
    return Cluster(name="test", gpu_types=("fast", "slow"),
                   node_gpus=np.array(gpus, np.int32), node_type=np.array(types, np.int32),
                   node_speed=np.array(speed, float), intra_bw_gbps=bw[:, 0].copy(),
                   inter_bw_gbps=bw[:, 1].copy())


#: per-type bandwidths unlike the defaults for the network term: the fast type has a faster
#: NVLink-class link inside a node and a 40 Gbit/s network, the slow type PCIe-class 64 and 2
NETWORK_BANDWIDTHS = ((1000.0, 40.0), (64.0, 2.0))


def specs(arrival, demand, work, model=None, delay=10.0) -> JobSpecs:
    n = len(arrival)
    demand = np.asarray(demand, np.int32)
    model = np.zeros(n, np.int32) if model is None else np.asarray(model, np.int32)
    work = np.asarray(work, float)
    ref = demand * np.where(model == 1, 0.5, 1.0)
    return JobSpecs(arrival=np.asarray(arrival, float), demand=demand, gpus_min=demand.copy(),
                    gpus_max=demand.copy(), model=model, work=work, est_duration=work / ref,
                    priority=np.ones(n), restart_delay=np.full(n, float(delay)))


class BarredOracle(LinearOracle):
    """LinearOracle where model 1 cannot run on "slow" GPUs (rate 0 there, like Gavel's
    ResNet-50 at batch 128 on K80s)."""

    def rates(self, model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types):
        r = super().rates(model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types)
        if "slow" not in cluster_types:
            return r
        slow = (np.asarray(type_mask) >> list(cluster_types).index("slow")) & 1 == 1
        return np.where(slow & (np.asarray(model_idx) == 1), 0.0, r)


def runnable(jobs: JobSpecs, cluster: Cluster, oracle, mixing: bool = False) -> JobSpecs:
    """``jobs`` made runnable on ``cluster``: a job that can run on no type becomes model 0,
    and each request is cut to the GPUs of the largest type the job can run on (``mixing``:
    of all those types together, for policies that mix types)."""
    from sim.engine import type_rate_table
    model = np.asarray(jobs.model, np.int32).copy()
    have = cluster.gpus_per_type()[None, :] > 0
    ok = (type_rate_table(cluster, jobs, oracle) > 0) & have
    model[~ok.any(axis=1)] = 0
    jobs = specs(jobs.arrival, jobs.demand, jobs.work, model, delay=float(jobs.restart_delay[0]))
    ok = type_rate_table(cluster, jobs, oracle) > 0
    room = ok * cluster.gpus_per_type()[None, :]
    cap = room.sum(axis=1) if mixing else room.max(axis=1)
    demand = np.minimum(jobs.demand, cap)
    return specs(jobs.arrival, demand, jobs.work, model, delay=float(jobs.restart_delay[0]))
