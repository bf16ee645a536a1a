"""Two Dask workers versus one on the same 20-cell sweep: report the speed-up.

    python scalability/dask_speedup.py [--spec scalability/specs/dask20.toml] [--repeat 1]

For each worker count it starts a LocalCluster of single-threaded worker processes (each worker
preloads sim.sweep._warm, so kernel loading is part of start-up), runs every cell of the spec
into a fresh temporary folder, and times the run from the cluster being ready to the last cell
stored (start-up and shutdown are reported apart).  It also checks that both runs stored the
same results.  The target (issue 7) is a speed-up of at least 1.6x on a 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _results(out: Path) -> list:
    from sim.sweep import SweepStore
    from sim.sweep.cells import TIMING_COLUMNS

    rows = SweepStore(out).summaries().to_pylist()
    return [{k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()
             if k not in TIMING_COLUMNS} for r in rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", type=Path, default=HERE / "specs" / "dask20.toml")
    ap.add_argument("--repeat", type=int, default=1, help="runs per worker count (best is kept)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                    help="first wait up to this long for the 1-minute load average to fall "
                         "below 0.5 (on a shared machine other work takes the cores)")
    args = ap.parse_args()
    deadline = time.monotonic() + args.wait_quiet
    while os.getloadavg()[0] >= 0.5 and time.monotonic() < deadline:
        time.sleep(10)

    from sim.sweep import load_spec, run_sweep
    from sim.sweep.runners import DaskEngine

    spec = load_spec(args.spec)
    print(f"spec {args.spec} ({spec.name}): {len(spec)} cells; {os.cpu_count()} CPUs; "
          f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    best: dict[int, float] = {}
    totals: dict[int, float] = {}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeat):
            for n in (1, 2):
                out = Path(tmp) / f"w{n}-r{rep}"
                t0 = time.perf_counter()
                report = run_sweep(spec, out, engine=DaskEngine("local", n))
                total = time.perf_counter() - t0
                if report.failed:
                    print(f"  {report.failed} cells failed: {report.failures[:3]}")
                    return 1
                print(f"  {n} worker{'s' if n > 1 else ' '}: cells {report.run_s:7.2f} s, "
                      f"with cluster start/stop {total:7.2f} s; load average "
                      f"{os.getloadavg()[0]:.2f}", flush=True)
                best[n] = min(best.get(n, math.inf), report.run_s)
                totals[n] = min(totals.get(n, math.inf), total)
                results[n] = _results(out)
    same = results[1] == results[2]
    speedup = best[1] / best[2]
    print(f"speed-up, 2 workers vs 1 on {len(spec)} cells: {speedup:.2f}x "
          f"(cells only; {totals[1] / totals[2]:.2f}x with cluster start/stop); "
          f"identical results: {same}")
    if args.json:
        args.json.write_text(json.dumps({"cells": len(spec), "one_worker_s": best[1],
                                         "two_workers_s": best[2], "speedup": speedup,
                                         "speedup_with_startup": totals[1] / totals[2],
                                         "identical_results": same}, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
