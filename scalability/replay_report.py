"""The part the replay scripts share: run the replay (optionally under cProfile), print the
comparison table and per-policy figures, and write the JSON document."""
from __future__ import annotations

import cProfile
import io
import json
import pstats
from pathlib import Path

import numpy as np

from sim.metrics import compare_table
from sim.traces import replay

KEYS = ("n_jobs", "avg_jct_s", "median_jct_s", "p99_jct_s", "avg_wait_s", "p99_wait_s", "makespan_s", "utilization",
        "frag_idle_gpus", "frag_fgd_gpus", "decisions", "mean_decision_ms", "sim_wall_s", "sim_cpu_s")


def replay_and_report(load, cluster, policies, *, profile: bool, out: Path | None, doc: dict,
                      **replay_kw) -> dict:
    """Replay, print, and with ``out`` write ``doc`` plus the policies' summaries as JSON."""
    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    results = replay(load, cluster, policies, **replay_kw)
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
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {**doc, "policies": {k: {key: (None if isinstance(v, float) and not np.isfinite(v) else v)
                                       for key, v in s.items()} for k, s in summaries.items()}}
        out.write_text(json.dumps(doc, indent=2, default=float))
        print(f"wrote {out}")
    return summaries
