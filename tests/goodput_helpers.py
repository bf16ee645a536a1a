"""A small synthetic Pollux profile ("toy") and workloads on it, written to a temporary folder.

Numbers are made up so that answers can be worked out by hand:

* validated batch sizes 8 and 16 (``M0 = 8``), 3 epochs of 100 progress each, ``grad_sqr = 1``
  and ``grad_var`` = 1, 2, 4 in epochs 0, 1, 2;
* step/sync times of placements 1, 2, 4, 11, 22 at per-GPU batches 4, 8, 16 (sync 0 on one GPU).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

VALIDATION = {8: [(100, 100), (200, 200), (300, 300)], 16: [(100, 80), (200, 160), (300, 240)]}
GRAD_VAR = (1.0, 2.0, 4.0)
#: placement -> {local batch: (step, sync)}
STEPS = {
    "1": {4: (0.10, 0.0), 8: (0.15, 0.0), 16: (0.25, 0.0)},
    "2": {4: (0.12, 0.02), 8: (0.20, 0.05), 16: (0.30, 0.05)},
    "4": {4: (0.14, 0.04), 8: (0.22, 0.07), 16: (0.32, 0.07)},
    "11": {4: (0.20, 0.10), 8: (0.25, 0.10), 16: (0.35, 0.10)},
    "22": {4: (0.24, 0.12), 8: (0.30, 0.13), 16: (0.40, 0.13)},
}
SCALABILITY = [(3, 6, b, 0.3 + 0.01 * b, 0.15) for b in (4, 8, 16)] + \
              [(4, 16, b, 0.4 + 0.01 * b, 0.2) for b in (4, 8, 16)]


def write_profile(root: Path, name: str = "toy", validation=None, steps=None) -> Path:
    d = Path(root) / name
    d.mkdir(parents=True, exist_ok=True)
    for bsz, rows in (validation or VALIDATION).items():
        lines = ["progress,iteration,metric,grad_sqr,grad_var"]
        lines += [f"{p},{it},0.5,1.0,{GRAD_VAR[e]}" for e, (p, it) in enumerate(rows)]
        (d / f"validation-{bsz}.csv").write_text("\n".join(lines) + "\n")
    lines = ["placement,local_bsz,step_time,sync_time"]
    for pl, by_b in (steps or STEPS).items():
        lines += [f"{pl},{b},{st},{sy}" for b, (st, sy) in by_b.items()]
    (d / "placements.csv").write_text("\n".join(lines) + "\n")
    lines = ["num_nodes,num_replicas,local_bsz,step_time,sync_time"]
    lines += [",".join(map(str, row)) for row in SCALABILITY]
    (d / "scalability.csv").write_text("\n".join(lines) + "\n")
    return d


def write_workload(path: Path, rows) -> Path:
    """rows: (name, time, application, num_replicas, batch_size)."""
    lines = ["name,time,application,num_replicas,batch_size"]
    lines += [",".join(map(str, r)) for r in rows]
    Path(path).write_text("\n".join(lines) + "\n")
    return Path(path)


def random_rows(n: int, seed: int, app: str = "toy"):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.choice([0, 5, 20, 60], n))
    gpus = rng.choice([1, 2, 4], n)
    batch = np.where(gpus == 4, 16, rng.choice([8, 16], n))
    return [(f"{app}-{i}", int(t[i]), app, int(gpus[i]), int(batch[i])) for i in range(n)]
