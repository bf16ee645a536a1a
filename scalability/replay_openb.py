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
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

from sim.engine import EngineConfig
from sim.metrics import compare_table
from sim.policies import list_policies
from sim.traces import read_nodes, read_trace, replay

SHARED = Path(os.environ.get("CLUSTERSIM_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
OPENB = SHARED / "traces" / "alibaba_openb_2023"
KEYS = ("n_jobs", "avg_jct_s", "median_jct_s", "p99_jct_s", "avg_wait_s", "p99_wait_s", "makespan_s", "utilization",
        "frag_idle_gpus", "frag_fgd_gpus", "decisions", "mean_decision_ms", "sim_wall_s", "sim_cpu_s")


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
    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    results = replay(load, cluster, policies, per_node=True, config=EngineConfig())
    if prof:
        prof.disable()
    summaries = {k: s for k, (_, s) in results.items()}
    print(compare_table(summaries))
    for k, s in summaries.items():
        print(f"{k}: " + ", ".join(f"{key} {s[key]:.4g}" if isinstance(s[key], float) else f"{key} {s[key]}"
                                   for key in KEYS))
    if prof:
        sio = io.StringIO()
        pstats.Stats(prof, stream=sio).sort_stats("cumulative").print_stats(25)
        print(sio.getvalue())
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"pods": str(args.pods), "nodes": str(args.nodes), "jobs": len(load.jobs),
               "arrival_scale": args.arrival_scale, "load_s": t_load, "cluster": cluster.describe(),
               "report": load.report.to_dict(),
               "policies": {k: {key: (None if isinstance(v, float) and not np.isfinite(v) else v)
                                for key, v in s.items()} for k, s in summaries.items()}}
        args.out.write_text(json.dumps(doc, indent=2, default=float))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
