"""Synthetic measurement tables from known parameters (for tests and for checking a pipeline).

:func:`synthetic_measurements` evaluates a fitted model (:class:`~sim.calibration.models.PolluxParams`
or :class:`~sim.calibration.models.HopsParams`) on a grid of placements and batch sizes and writes the
rows the measurement schema expects, optionally with multiplicative log-normal noise.  Hops rows
also carry the component times (forward, backward, update, data).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from .models import HopsParams, PolluxParams
from .schema import measurements_from_rows

__all__ = ["synthetic_measurements", "DEFAULT_PLACEMENTS", "EXAMPLE_POLLUX", "EXAMPLE_HOPS"]

#: Placements of a 4-GPU-per-node cluster, 1 to 12 GPUs.
DEFAULT_PLACEMENTS: tuple[tuple[int, ...], ...] = (
    (1,), (2,), (3,), (4,), (1, 1), (2, 2), (1, 3), (4, 4), (2, 2, 2), (4, 4, 4), (1, 1, 1, 1), (3, 3, 3, 3),
)
EXAMPLE_POLLUX = PolluxParams(alpha_c=0.05, beta_c=0.004, alpha_n=0.15, beta_n=0.01, alpha_r=0.03,
                              beta_r=0.004, gamma=1.8)
EXAMPLE_HOPS = HopsParams(a_c=0.04, b_c=0.003, r_b=0.65, u=0.01, a_d=0.005, b_d=0.0005, w=0.004,
                          c_link=0.06, c_net=0.2, pattern=2, nonoverlap=0.2)


def synthetic_measurements(params: PolluxParams | HopsParams, *, model: str = "synthetic",
                           gpu_type: str = "v100", placements: Sequence[Sequence[int]] = DEFAULT_PLACEMENTS,
                           batch_sizes: Sequence[int] = (8, 16, 32, 64, 128), noise: float = 0.0,
                           seed: int = 0, components: bool | None = None) -> pa.Table:
    """One row per (placement, batch size); ``noise`` is the sigma of a log-normal factor."""
    rng = np.random.default_rng(seed)
    hops = isinstance(params, HopsParams)
    components = hops if components is None else components
    rows = []
    for pl in placements:
        pl = [int(x) for x in pl]
        n, k = len(pl), sum(pl)
        for b in batch_sizes:
            step = float(params.step_time(b, n, k, 0, max(pl)))
            acc = float(params.accum_time(b, n, k))

            def jitter(x: float) -> float:
                return float(x * np.exp(rng.normal(0.0, noise))) if noise > 0 else float(x)
            step_m = jitter(step)
            acc_m = min(jitter(acc), step_m)
            row = dict(model=model, gpu_type=gpu_type, source="synthetic", n_gpus=k, n_nodes=n, placement=pl,
                       local_bsz=int(b), step_time_s=step_m, sync_time_s=step_m - acc_m, repeats=1)
            if components and hops:
                c = params.components(b, n, k)
                row.update(forward_s=jitter(float(c["forward"])), backward_s=jitter(float(c["backward"])),
                           update_s=jitter(float(c["update"])), data_time_s=jitter(float(c["data"])))
            rows.append(row)
    return measurements_from_rows(rows, source="synthetic")
