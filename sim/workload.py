"""Seeded synthetic workloads.

:func:`generate_workload` draws ``n_jobs`` jobs with Poisson arrivals (exponential inter-arrival
times at ``load_jobs_per_hour``, the first job at t = 0), a GPU count and a duration per job, and a
model drawn uniformly from the throughput table's models that support that count.

Sizes and durations (``sizes=`` / ``durations=``):

* ``"gavel"`` follows Gavel's generator (stanford-futuredata/gavel ``scheduler/utils.py``
  ``_generate_scale_factor`` / ``_generate_duration`` / ``generate_job``, and the Poisson
  arrivals of ``scheduler.py`` ``simulate``; Narayanan et al., OSDI'20): GPU count 1, 2, 4, 8
  with probability 0.7, 0.1, 0.15, 0.05 (:data:`GAVEL_SIZE_MIX`); duration ``60 * 10**U(1.5, 3)``
  s with probability 0.8, else ``60 * 10**U(3, 4)`` s; the first job at t = 0, then
  exponential gaps.  As in Gavel, the duration is the run time on the reference type (v100) at
  the drawn count, consolidated (Gavel's ``num_steps = duration * throughput``: ``work=
  "iterations"`` gives the same steps), and the model is uniform over the job types, a
  multi-GPU job's over those measured at more than one GPU (Gavel: rejection sampling over its
  26 ``JobTable`` templates, the 19 ``distributed`` ones for a multi-GPU job; with the built-in
  table, which is Gavel's, the two laws are the same).  Differences, on purpose: the draws come
  from numpy (the same seed gives the same law as Gavel's, not Gavel's exact trace; read a
  trace Gavel wrote with :mod:`sim.traces.gavel` for that); no SLOs (Gavel draws them only for
  its SLO experiments); and, while ``runnable_only`` is on (the default), a (model, count) pair
  whose throughput is 0 on a GPU type of the table is not drawn -- in Gavel's table only
  ResNet-50 at batch 128 on 2, 4 or 8 GPUs (out of memory on K80s), about 1.6% of Gavel's
  jobs, which then get another multi-GPU model -- because the textbook policies would place it
  on a K80 and stop the run (issue 11, core fixes); pass ``runnable_only=False`` for Gavel's
  exact model law with policies that skip zero-throughput types (``gavel-*``, ``themis``).
* ``"philly"`` resamples from a built-in empirical table (sim/data/philly_duration_quantiles.json):
  the share of jobs at 1, 2, 4, 8 GPUs and 45 run-time quantiles per GPU count, computed from the
  33,192 Philly samples Gavel ships (``philly_job_distribution.pickle``; Jeon et al., ATC'19).
  Both ``"philly"``: (gpus, duration) pairs follow the joint distribution; ``sizes="gavel",
  durations="philly"``: the duration is drawn given the Gavel-drawn count.  With
  ``philly_samples=PATH`` (CSV with columns ``duration_s,num_gpus``) pairs are resampled from
  that file instead (uniformly over its rows).
* ``"hops"``: the size classes of the Hops paper's workload (Wang et al., SoCC'24 §4;
  algorithms.md §4.11) by GPU-duration (GPU count x run time on the reference type): S 0-1 h,
  M 1-10 h, L 10-50 h, XL > 50 h (:data:`HOPS_SIZE_CLASSES`).  The paper gives neither the mix
  of classes nor a bound for XL nor the law inside a class, so these are ours [I]: the class
  is uniform over the four (no information favours one), the GPU-duration log-uniform inside
  it, S from 0.1 h and XL up to 100 h (twice its lower bound); the run time is the GPU-duration
  over the drawn GPU count.  Mean 25 GPU-hours a job.
* ``sizes="hops"``: the Hops paper's requests span 1-16 GPUs ("1-16 GPUs, up to 8 options per
  job"), with no law given; ours [I] draws the requested count uniformly over the powers of two
  in that range (:data:`HOPS_GPU_COUNTS`: 1, 2, 4, 8, 16; mean 6.2 GPUs), the counts data-parallel
  jobs are given in practice.  Gavel's law (mean 1.65 GPUs) leaves the Hops paper's 512-GPU
  cluster without a queue at 100 jobs/h (docs/hops.md); this one queues it.

Everything comes from one ``numpy.random.Generator(PCG64(seed))`` in a fixed order, so the same
arguments give an identical table.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from .errors import ConfigError, TraceError
from .jobs import JOB_SCHEMA, JobTable
from .limits import MAX_LOAD_PER_HOUR, MAX_TIME_S, MIN_LOAD_PER_HOUR, check_seed, clip, fmt_num
from .throughput import TableThroughput, ThroughputOracle

__all__ = ["generate_workload", "GAVEL_SIZE_MIX", "GAVEL_LONG_JOB_PROB", "GAVEL_SHORT_LOG10_MIN",
           "GAVEL_LONG_LOG10_MIN", "GAVEL_HIGH_PRIORITY", "HOPS_SIZE_CLASSES", "HOPS_GPU_COUNTS", "SIZES", "philly_distribution", "read_philly_samples"]

#: Gavel's scale-factor mix: (GPU count, probability)  [C: gavel scheduler/utils.py].
GAVEL_SIZE_MIX = ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05))
#: Probability of a long job in Gavel's duration generator.
GAVEL_LONG_JOB_PROB = 0.2
#: log10 of the duration in minutes: U(1.5, 3) for short jobs, U(3, 4) for long ones.
GAVEL_SHORT_LOG10_MIN = (1.5, 3.0)
GAVEL_LONG_LOG10_MIN = (3.0, 4.0)
#: Hops' size classes by GPU-duration in hours, (name, low, high) [S: Hops §4; bounds of S's low
#: end and XL's high end are ours, see the module docstring]; drawn uniformly, log-uniform inside.
HOPS_SIZE_CLASSES = (("S", 0.1, 1.0), ("M", 1.0, 10.0), ("L", 10.0, 50.0), ("XL", 50.0, 100.0))
#: Requested GPU counts of ``sizes="hops"``, drawn uniformly [I: the paper gives the range 1-16 only].
HOPS_GPU_COUNTS = (1, 2, 4, 8, 16)
#: Gavel's multi-priority experiments give 20% of jobs weight 5 (``high_priority_fraction=0.2``).
GAVEL_HIGH_PRIORITY = 5.0

#: the ``sizes=`` laws of :func:`generate_workload`
SIZES = ("gavel", "philly", "single", "hops")

_BATCH = re.compile(r"\(batch size (\d+)\)")


@lru_cache(maxsize=1)
def philly_distribution() -> dict:
    """The built-in Philly table: gpu_counts, gpu_count_share, probabilities, quantiles."""
    with resources.files("sim").joinpath("data/philly_duration_quantiles.json").open("r") as f:
        doc = json.load(f)
    return {
        "gpu_counts": np.array(doc["gpu_counts"], dtype=np.int64),
        "share": np.array(doc["gpu_count_share"], dtype=np.float64),
        "p": np.array(doc["probabilities"], dtype=np.float64),
        "log_q": {int(g): np.log(np.array(q, dtype=np.float64)) for g, q in doc["duration_quantiles_s"].items()},
        "doc": doc,
    }


def read_philly_samples(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a ``duration_s,num_gpus`` CSV; returns (duration_s float64, num_gpus int64)."""
    import pyarrow.csv as pacsv

    path = Path(path)
    src = str(path)
    if not path.exists():
        raise TraceError("samples file not found", file=src)
    try:
        t = pacsv.read_csv(path)
    except pa.ArrowInvalid as exc:
        raise TraceError(f"cannot read CSV: {exc}", file=src) from None
    for c in ("duration_s", "num_gpus"):
        if c not in t.column_names:
            raise TraceError("missing required column", file=src, field=c)
    if t.num_rows == 0:
        raise TraceError("no samples", file=src)
    try:
        d = t.column("duration_s").cast(pa.float64()).to_numpy()
        g_col = t.column("num_gpus")
        if g_col.null_count:
            raise TraceError("missing value", file=src, row=int(np.flatnonzero(
                g_col.is_null().to_numpy(zero_copy_only=False))[0]), field="num_gpus")
        g = g_col.cast(pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise TraceError(f"non-numeric value: {exc}", file=src) from None
    bad = np.flatnonzero(~(d > 0) | ~np.isfinite(d))
    if bad.size:
        raise TraceError(f"duration {d[bad[0]]!r} must be > 0 and finite", file=src, row=int(bad[0]),
                         field="duration_s")
    bad = np.flatnonzero(g < 1)
    if bad.size:
        raise TraceError(f"num_gpus {g[bad[0]]} must be >= 1", file=src, row=int(bad[0]), field="num_gpus")
    return d, g


def _gavel_sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    counts = np.array([c for c, _ in GAVEL_SIZE_MIX], dtype=np.int64)
    cum = np.cumsum([p for _, p in GAVEL_SIZE_MIX])
    cum[-1] = 1.0
    return counts[np.searchsorted(cum, rng.random(n), side="right")]


def _gavel_durations(rng: np.random.Generator, n: int) -> np.ndarray:
    long_ = rng.random(n) < GAVEL_LONG_JOB_PROB
    u = rng.random(n)
    lo = np.where(long_, GAVEL_LONG_LOG10_MIN[0], GAVEL_SHORT_LOG10_MIN[0])
    hi = np.where(long_, GAVEL_LONG_LOG10_MIN[1], GAVEL_SHORT_LOG10_MIN[1])
    return 60.0 * 10.0 ** (lo + (hi - lo) * u)


def _hops_durations(rng: np.random.Generator, gpus: np.ndarray) -> np.ndarray:
    """Run times (s) at ``gpus`` of GPU-durations drawn from :data:`HOPS_SIZE_CLASSES`."""
    bounds = np.log(np.array([(lo, hi) for _, lo, hi in HOPS_SIZE_CLASSES]))
    cls = rng.integers(0, bounds.shape[0], size=gpus.shape[0])
    lo, hi = bounds[cls, 0], bounds[cls, 1]
    gpu_h = np.exp(lo + (hi - lo) * rng.random(gpus.shape[0]))
    return 3600.0 * gpu_h / gpus


def _philly_durations(rng: np.random.Generator, gpus: np.ndarray) -> np.ndarray:
    dist = philly_distribution()
    u = rng.random(gpus.shape[0])
    out = np.empty(gpus.shape[0])
    known = dist["gpu_counts"]
    for g in np.unique(gpus):
        # counts the table lacks use the nearest tabulated count not above it (at least 1)
        gg = known[known <= g].max() if (known <= g).any() else known.min()
        sel = gpus == g
        out[sel] = np.exp(np.interp(u[sel], dist["p"], dist["log_q"][int(gg)]))
    return out


def _runs_everywhere(oracle, models: list[int], g: int) -> list[int]:
    """The models whose rate at ``g`` GPUs is > 0 on every GPU type of the oracle's table."""
    if not models:
        return models
    types = tuple(oracle.gpu_types)
    m = np.repeat(np.asarray(models, np.int64), len(types))
    mask = np.tile(np.left_shift(1, np.arange(len(types), dtype=np.int64)), len(models))
    one = np.ones(m.size, np.int64)
    rates = np.asarray(oracle.rates(m, one * g, one, mask, np.ones(m.size), types))
    ok = (rates.reshape(len(models), len(types)) > 0).all(axis=1)
    return [mi for mi, keep in zip(models, ok) if keep]


def _pick_models(rng: np.random.Generator, gpus: np.ndarray, oracle, allowed: list[int],
                 runnable_only: bool = True) -> np.ndarray:
    """Uniform over the allowed models that support each job's count (vectorized per count);
    with ``runnable_only``, only those that can run on every GPU type of the table there."""
    u = rng.random(gpus.shape[0])
    out = np.empty(gpus.shape[0], dtype=np.int64)
    counts = {m: oracle.supported_counts(oracle.models[m]) for m in allowed}
    for g in np.unique(gpus):
        elig = [m for m in allowed if int(g) in counts[m]]
        if not elig:  # count not measured anywhere: any multi-GPU model (interpolated rate)
            elig = [m for m in allowed if counts[m][-1] > 1] if g > 1 else []
        if runnable_only:
            elig = _runs_everywhere(oracle, elig, int(g))
        if not elig:
            raise ConfigError(f"no model in the throughput table supports {int(g)} GPU(s) "
                              f"(models: {', '.join(oracle.models[m] for m in allowed)})")
        sel = gpus == g
        arr = np.array(elig, dtype=np.int64)
        out[sel] = arr[np.minimum((u[sel] * len(arr)).astype(np.int64), len(arr) - 1)]
    return out


def _check_load(n_jobs: int, load) -> None:
    """The arrival rate in its documented range, and the expected arrivals inside the horizon
    (a generated table past it would fail row by row, less clearly)."""
    try:
        rate = float(load)
    except (TypeError, ValueError):
        raise ConfigError(f"load_jobs_per_hour must be a number, got {clip(repr(load))}") from None
    if not MIN_LOAD_PER_HOUR <= rate <= MAX_LOAD_PER_HOUR:
        raise ConfigError(f"load (jobs per hour) must be in [{fmt_num(MIN_LOAD_PER_HOUR)}, "
                          f"{fmt_num(MAX_LOAD_PER_HOUR)}], got {fmt_num(rate)}")
    span = 3600.0 * n_jobs / rate
    if span > MAX_TIME_S / 2:
        raise ConfigError(f"load {fmt_num(rate)} jobs/h: {n_jobs} jobs would arrive over about "
                          f"{span:.3g} s, past the horizon of {fmt_num(MAX_TIME_S)} s; raise the load")


def generate_workload(n_jobs: int, load_jobs_per_hour: float, seed: int, *,
                      models: Sequence[str] | None = None, sizes: str = "gavel", durations: str = "gavel",
                      throughput: ThroughputOracle | None = None, philly_samples=None,
                      work: str = "duration", high_priority_fraction: float = 0.0,
                      high_priority: float = GAVEL_HIGH_PRIORITY, n_users: int = 0,
                      runnable_only: bool = True) -> JobTable:
    """Generate a seeded synthetic job table (see the module docstring).

    Args:
        n_jobs: number of jobs (>= 0).
        load_jobs_per_hour: Poisson arrival rate, in [1e-6, 1e9]; the expected span of the
            arrivals, ``n_jobs / load`` hours, must end before the horizon (:mod:`sim.limits`).
        seed: seed of ``numpy.random.Generator(PCG64(seed))``, an integer in [0, 2**63).
        models: restrict the models drawn (names in the throughput table); default all.
        sizes: ``"gavel"``, ``"philly"``, ``"single"`` (every job 1 GPU: Gavel's single-GPU
            experiments, ``generate_multi_gpu_jobs=False``) or ``"hops"`` (1-16 GPUs, powers of
            two, uniform: :data:`HOPS_GPU_COUNTS`).
        durations: ``"gavel"``, ``"philly"`` or ``"hops"`` (the Hops paper's size classes).
        throughput: the oracle models come from; default :meth:`TableThroughput.builtin`.
        philly_samples: optional CSV (``duration_s,num_gpus``) to resample instead of the built-in
            Philly table; used when ``sizes`` or ``durations`` is ``"philly"``.
        work: ``"duration"`` (jobs carry duration_s) or ``"iterations"`` (duration times the
            oracle's reference rate, as Gavel's ``num_steps``).
        high_priority_fraction: share of jobs given priority ``high_priority`` (Gavel's
            multi-priority experiments: 0.2 and 5.0); others get 1.0.
        n_users: if > 0, jobs get users ``"u0" .. "u{n-1}"`` uniformly; else user "".
        runnable_only: draw only (model, GPU count) pairs whose rate is > 0 on every GPU type of
            the table (see the module docstring); False: Gavel's model law exactly.
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 0:
        raise ConfigError(f"n_jobs must be an integer >= 0, got {n_jobs!r}")
    _check_load(n_jobs, load_jobs_per_hour)
    seed = check_seed(seed)
    if sizes not in SIZES:
        raise ConfigError(f"sizes must be one of {', '.join(map(repr, SIZES))}, got {sizes!r}")
    if durations not in ("gavel", "philly", "hops"):
        raise ConfigError(f"durations must be 'gavel', 'philly' or 'hops', got {durations!r}")
    if work not in ("duration", "iterations"):
        raise ConfigError(f"work must be 'duration' or 'iterations', got {work!r}")
    if not 0.0 <= high_priority_fraction <= 1.0:
        raise ConfigError(f"high_priority_fraction must be in [0, 1], got {high_priority_fraction}")
    oracle = throughput if throughput is not None else TableThroughput.builtin()
    if models is None:
        allowed = list(range(len(oracle.models)))
    else:
        idx = {m: i for i, m in enumerate(oracle.models)}
        missing = [m for m in models if m not in idx]
        if missing:
            raise ConfigError(f"unknown model {missing[0]!r} (throughput table has: {', '.join(oracle.models)})")
        if not models:
            raise ConfigError("models must not be empty")
        allowed = sorted({idx[m] for m in models})

    n = int(n_jobs)
    rng = np.random.Generator(np.random.PCG64(seed))
    # 1. arrivals
    gaps = rng.exponential(3600.0 / load_jobs_per_hour, size=n)
    arrival = np.zeros(n)
    if n > 1:
        arrival[1:] = np.cumsum(gaps[1:])
    # 2. sizes and durations
    samples = read_philly_samples(philly_samples) if philly_samples is not None and \
        "philly" in (sizes, durations) else None
    if sizes == "philly" and durations == "philly" and samples is not None:
        pick = rng.integers(0, samples[0].shape[0], size=n)
        gpus, dur = samples[1][pick], samples[0][pick]
    else:
        if sizes == "gavel":
            gpus = _gavel_sizes(rng, n)
        elif sizes == "single":
            gpus = np.ones(n, dtype=np.int64)
        elif sizes == "hops":
            gpus = np.array(HOPS_GPU_COUNTS, dtype=np.int64)[rng.integers(0, len(HOPS_GPU_COUNTS), size=n)]
        elif samples is not None:
            gpus = samples[1][rng.integers(0, samples[1].shape[0], size=n)]
        else:
            dist = philly_distribution()
            cum = np.cumsum(dist["share"])
            cum[-1] = 1.0
            gpus = dist["gpu_counts"][np.searchsorted(cum, rng.random(n), side="right")]
        if durations == "gavel":
            dur = _gavel_durations(rng, n)
        elif durations == "hops":
            dur = _hops_durations(rng, gpus)
        elif samples is not None:
            # resample a duration among the file's rows with the same GPU count (any row if none)
            dur = np.empty(n)
            u = rng.random(n)
            for g in np.unique(gpus):
                pool = samples[0][samples[1] == g]
                if pool.size == 0:
                    pool = samples[0]
                sel = gpus == g
                dur[sel] = pool[np.minimum((u[sel] * pool.size).astype(np.int64), pool.size - 1)]
        else:
            dur = _philly_durations(rng, gpus)
    # 3. models
    model_idx = _pick_models(rng, gpus, oracle, allowed, runnable_only)
    # 4. priorities and users
    prio = np.where(rng.random(n) < high_priority_fraction, float(high_priority), 1.0) \
        if high_priority_fraction > 0 else np.ones(n)
    users = [f"u{i}" for i in rng.integers(0, n_users, size=n)] if n_users > 0 else [""] * n

    names = np.array(oracle.models, dtype=object)[model_idx] if n else np.array([], dtype=object)
    batch = np.array([int(m.group(1)) if (m := _BATCH.search(s)) else 0 for s in oracle.models],
                     dtype=np.int32)[model_idx] if n else np.zeros(0, np.int32)
    g32 = gpus.astype(np.int32)
    if work == "iterations":
        iters = pa.array(np.asarray(oracle.reference_rate(model_idx, gpus)) * dur)
        durs = pa.nulls(n, pa.float64())
    else:
        iters = pa.nulls(n, pa.float64())
        durs = pa.array(dur)
    t = pa.table({
        "job_id": pa.array(np.arange(n, dtype=np.int64)),
        "arrival_s": pa.array(arrival),
        "user": pa.array(users, pa.string()),
        "vc": pa.array([""] * n, pa.string()),
        "gpus": pa.array(g32),
        "gpus_min": pa.array(g32),
        "gpus_max": pa.array(g32),
        "gpus_allowed": pa.nulls(n, pa.list_(pa.int32())),
        "iterations": iters,
        "duration_s": durs,
        "model": pa.array(names.tolist(), pa.string()),
        "batch_size": pa.array(batch),
        "priority": pa.array(prio),
        "budget_iterations": pa.nulls(n, pa.float64()),
    }).cast(JOB_SCHEMA)
    src = f"<generated: n={n}, load={load_jobs_per_hour}/h, seed={seed}, sizes={sizes}, durations={durations}>"
    return JobTable.from_table(t, src)
