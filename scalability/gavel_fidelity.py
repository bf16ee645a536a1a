"""Our gavel-* policies on a Gavel trace, in Gavel's simulator setting (docs/gavel.md).

    python scalability/gavel_fidelity.py TRACE [THROUGHPUTS_JSON] [--policies a,b] [--cluster 36:36:36]

Gavel's simulator setting: ``--cluster V:P:K`` servers of one GPU each (its default
``--num_gpus_per_server 1:1:1``), its measured table with the consolidated rate for every
placement (``TableThroughput(multi_server="gavel")``: its simulator never reads the
``*_unconsolidated`` entries), no restart delay (it has none), the type choice of the run
(``--type-choice``, for the textbook policies; the gavel-* policies choose their own types).  THROUGHPUTS_JSON defaults to the built-in table, which is Gavel's.  Prints avg JCT
and makespan (hours) and CPU seconds per policy.
"""
from __future__ import annotations

import argparse
import time

from sim.cluster import cluster_from_groups
from sim.engine import EngineConfig, simulate
from sim.metrics import summary
from sim.policies import get_policy
from sim.throughput import TableThroughput
from sim.traces.gavel import read_gavel

GAVEL_NAMES = {  # ours -> Gavel's policy name in its utils.get_policy
    "gavel-fifo": "fifo", "gavel-fifo-perf": "fifo_perf",
    "gavel-max-min-fairness": "max_min_fairness", "gavel-max-min-fairness-perf": "max_min_fairness_perf",
    "gavel-finish-time-fairness": "finish_time_fairness",
    "gavel-finish-time-fairness-perf": "finish_time_fairness_perf",
    "gavel-min-total-duration-perf": "min_total_duration_perf",
    "gavel-max-sum-throughput-perf": "max_sum_throughput_perf", "gavel-isolated": "isolated",
    "gavel-gandiva": "gandiva",
}


def gavel_oracle(path: str | None = None) -> TableThroughput:
    """Gavel's table as its simulator uses it: the consolidated rate whatever the servers
    (``multi_server="gavel"``; a Gavel JSON, default the built-in table, which is Gavel's)."""
    if path is None:
        return TableThroughput.builtin(multi_server="gavel")
    return TableThroughput.from_gavel_json(path, multi_server="gavel")


def gavel_cluster(spec: str):
    counts = [int(x) for x in spec.split(":")]
    return cluster_from_groups(f"gavel-{spec}-1gpu", [
        {"count": n, "gpus": 1, "type": t, "name_prefix": f"{t}-"}
        for n, t in zip(counts, ("v100", "p100", "k80")) if n])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("throughputs", nargs="?", default=None)
    ap.add_argument("--policies", default=",".join(GAVEL_NAMES))
    ap.add_argument("--cluster", default="36:36:36")
    ap.add_argument("--type-choice", default="first-fit", choices=("first-fit", "fastest", "random"))
    args = ap.parse_args()
    oracle = gavel_oracle(args.throughputs)
    jobs = read_gavel(args.trace).jobs
    cluster = gavel_cluster(args.cluster)
    for name in args.policies.split(","):
        t0 = time.process_time()
        res = simulate(cluster, jobs, get_policy(name), oracle,
                       EngineConfig(restart_delay_s=0.0, type_choice=args.type_choice))
        s = summary(res)
        print(f"{name}\t{GAVEL_NAMES.get(name, '')}\t{s['avg_jct_s'] / 3600:.3f}\t"
              f"{s['makespan_s'] / 3600:.3f}\t{time.process_time() - t0:.2f}", flush=True)


if __name__ == "__main__":
    main()
