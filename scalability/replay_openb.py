"""Replay the Alibaba openb pod trace (Weng et al., FGD, ATC'23; alibaba/clusterdata
cluster-trace-gpu-v2023) on the openb node list (1,213 GPU nodes, 6,212 GPUs).

Pods arrive at ``creation_time`` and run ``deletion_time - scheduled_time`` (sim.traces.openb);
a fractional-GPU pod holds one whole GPU (``--fractional ceil``, the engine allocates whole
GPUs); CPU pods and never-scheduled pods are left out and counted.  Every pod runs its recorded
run time on any node type (sim.traces.replay_oracle, uniform speeds).  Usage::

    python scalability/replay_openb.py                        # FIFO, default pod list
    python scalability/replay_openb.py --arrival-scale 0.01 --policies fifo,sjf

The files are read from $CLUSTERSIM_SHARED_DATA or ../shared/data (not part of the project).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


from sim.engine import EngineConfig
from sim.policies import list_policies
from sim.traces import read_nodes, read_trace

from replay_report import replay_and_report  # noqa: E402  (beside this script)

SHARED = Path(os.environ.get("CLUSTERSIM_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
OPENB = SHARED / "traces" / "alibaba_openb_2023"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pods", type=Path, default=OPENB / "openb_pod_list_default.csv")
    ap.add_argument("--nodes", type=Path, default=OPENB / "openb_node_list_all_node.csv")
    ap.add_argument("--policies", default="fifo")
    ap.add_argument("--fractional", default="ceil", choices=("ceil", "drop", "error"))
    ap.add_argument("--arrival-scale", type=float, default=1.0,
                    help="multiply every arrival time by this factor (< 1: a what-if at higher load)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="write results as JSON")
    args = ap.parse_args(argv)
    for p in (args.pods, args.nodes):
        if not p.exists():
            print(f"not found: {p} (set CLUSTERSIM_SHARED_DATA)", file=sys.stderr)
            return 2
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    missing = [p for p in policies if p not in list_policies()]
    if missing:
        print(f"policies not registered: {', '.join(missing)}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    nodes = read_nodes(args.nodes)
    load = read_trace(args.pods, "openb", fractional=args.fractional)
    t_load = time.perf_counter() - t0
    if args.arrival_scale != 1.0:
        import pyarrow as pa
        from sim.jobs import JobTable
        t = load.jobs.table
        i = t.schema.get_field_index("arrival_s")
        load.jobs = JobTable.from_table(t.set_column(i, "arrival_s", pa.array(t.column("arrival_s").to_numpy()
                                                                                * args.arrival_scale)), load.jobs.source)
    cluster = nodes.cluster
    print(f"pods: {args.pods}: {len(load.jobs)} GPU pods replayed, loaded with the nodes in {t_load:.2f} s"
          + (f", arrivals x {args.arrival_scale:g}" if args.arrival_scale != 1.0 else ""))
    print("\n".join(load.report.lines()))
    print("\n".join(nodes.report.lines()))
    print(f"cluster: {cluster.describe()}")
    replay_and_report(load, cluster, policies, profile=args.profile, out=args.out,
                      doc={"pods": str(args.pods), "nodes": str(args.nodes), "jobs": len(load.jobs),
               "arrival_scale": args.arrival_scale, "load_s": t_load, "cluster": cluster.describe(),
               "report": load.report.to_dict()},
                      per_node=True, config=EngineConfig())
    return 0


if __name__ == "__main__":
    sys.exit(main())
