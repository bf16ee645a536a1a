"""Recorded training logits as the entropy signal: an Arrow IPC "logits trace".

Format (an Arrow IPC file or stream; one row per sample)::

    model   string (or dictionary<string>)   the throughput-table model name of the job
    epoch   int                              0-based epoch
    worker  int                              0-based worker (data shard) index
    logits  fixed_size_list<float> or list<float> (float16/32/64): one sample's logits

Jobs of a model share its rows: at the end of its epoch ``e`` a job's worker ``k`` reads
the trace's worker ``k mod W`` of ``(model, e)`` (W = the workers recorded for that epoch).
Entropy is computed with :func:`sim.entropy.grouped_mean_entropy` during the run, batched per
epoch event: every decision gathers all (model, epoch) pairs that jobs crossed and runs one
grouped pass over their rows; results are cached per (model, epoch).  Opening the file reads
only the three key columns (the file is memory mapped).

Bad input is a :class:`~sim.errors.TraceError` naming the job and the epoch: a job whose
model is not in the trace (epoch 0), an epoch the trace lacks for the job's model, a class
count that differs from the one the job saw before, an entropy that is NaN (NaN/inf logits
or null rows only).

:func:`synthetic_logits_trace` writes a trace whose per-worker mean entropy follows a given
curve times a per-worker (non-IID) difficulty.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..entropy import grouped_mean_entropy
from ..errors import ConfigError, TraceError

__all__ = ["LogitsTrace", "synthetic_logits_trace", "logits_for_entropy"]

_KEYS = ("model", "epoch", "worker", "logits")


def _read_table(path) -> tuple[str, pa.Table]:
    p = os.fspath(path)
    try:
        source = pa.memory_map(p, "r")
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(f"cannot open logits trace: {exc}", file=p) from exc
    try:
        table = pa.ipc.open_file(source).read_all()
    except pa.ArrowInvalid:
        try:
            source.seek(0)
            table = pa.ipc.open_stream(source).read_all()
        except pa.ArrowInvalid as exc:
            raise TraceError(f"not an Arrow IPC file or stream ({exc})", file=p) from exc
    return p, table


class LogitsTrace:
    """An indexed logits trace; see the module docstring."""

    def __init__(self, path, impl: str = "c"):
        self.path, table = _read_table(path)
        missing = [c for c in _KEYS if c not in table.column_names]
        if missing:
            raise TraceError(f"logits trace lacks column(s) {missing}; needs {list(_KEYS)}",
                             file=self.path, field=missing[0])
        self.table = table
        self.impl = impl
        mcol = table.column("model")
        if pa.types.is_dictionary(mcol.type):
            mcol = mcol.cast(pa.string())
        if mcol.null_count or table.column("epoch").null_count or table.column("worker").null_count:
            raise TraceError("null model, epoch or worker", file=self.path)
        models = np.asarray(mcol.to_numpy(zero_copy_only=False), dtype=object)
        try:
            epoch = table.column("epoch").to_numpy().astype(np.int64)
            worker = table.column("worker").to_numpy().astype(np.int64)
        except (pa.ArrowInvalid, ValueError, TypeError) as exc:
            raise TraceError(f"epoch and worker must be integers ({exc})", file=self.path) from None
        if epoch.size and (epoch.min() < 0 or worker.min() < 0):
            bad = int(np.flatnonzero((epoch < 0) | (worker < 0))[0])
            raise TraceError("negative epoch or worker", file=self.path, row=bad)
        self.model_names, midx = np.unique(models, return_inverse=True) if models.size else \
            (np.array([], object), np.zeros(0, np.int64))
        self.model_names = tuple(str(m) for m in self.model_names)
        self._midx, self._epoch, self._worker = midx.astype(np.int64), epoch, worker
        # rows grouped by (model, epoch): one sort, offsets per pair
        key = self._midx * (int(epoch.max(initial=0)) + 1) + epoch
        self._order = np.argsort(key, kind="stable")
        skey = key[self._order]
        self._pairs, self._start = np.unique(skey, return_index=True)
        self._stop = np.append(self._start[1:], skey.size)
        self._stride = int(epoch.max(initial=0)) + 1
        self.n_epochs = {}
        for mi, name in enumerate(self.model_names):
            eps = self._pairs[self._pairs // self._stride == mi] % self._stride
            self.n_epochs[name] = int(eps.max()) + 1 if eps.size else 0
        self._classes = self._class_counts(table.column("logits"))
        self._cache: dict[tuple[int, int], np.ndarray] = {}
        self._bound_models: np.ndarray | None = None

    def _class_counts(self, col) -> np.ndarray:
        """Class count per (model, epoch) pair; -1 where the rows of one pair disagree."""
        typ = col.type
        if pa.types.is_fixed_size_list(typ):
            return np.full(self._pairs.size, typ.list_size, np.int64)
        if not (pa.types.is_list(typ) or pa.types.is_large_list(typ)):
            raise TraceError(f"logits must be a list of floats, got {typ}", file=self.path,
                             field="logits")
        lens = pc.list_value_length(col).to_numpy(zero_copy_only=False)
        lens = np.where(np.isnan(lens.astype(float)), -1, lens).astype(np.int64)[self._order]
        lo = np.minimum.reduceat(lens, self._start) if lens.size else np.zeros(0, np.int64)
        hi = np.maximum.reduceat(lens, self._start) if lens.size else np.zeros(0, np.int64)
        return np.where(lo == hi, lo, -1)

    # ------------------------------------------------------------------ binding
    def bind(self, model_names: Sequence[str], job_models: np.ndarray, job_ids: np.ndarray) -> None:
        """Check that every model of the workload is in the trace (error: the first job)."""
        known = {m: i for i, m in enumerate(self.model_names)}
        tm = np.array([known.get(str(m), -1) for m in model_names], np.int64)
        used = np.unique(job_models)
        for m in used:
            if tm[m] < 0:
                j = int(job_ids[np.flatnonzero(job_models == m)[0]])
                raise TraceError(f"job {j}, epoch 0: model {model_names[m]!r} is not in the logits "
                                 f"trace (models there: {', '.join(self.model_names) or 'none'})",
                                 file=self.path, field="model")
        self._bound_models = tm

    def _pair_index(self, tmodel: np.ndarray, epochs: np.ndarray) -> np.ndarray:
        key = tmodel * self._stride + epochs
        pos = np.searchsorted(self._pairs, key)
        pos = np.minimum(pos, max(self._pairs.size - 1, 0))
        ok = (epochs < self._stride) & (self._pairs.size > 0)
        ok &= self._pairs[pos] == key if self._pairs.size else False
        return np.where(ok, pos, -1)

    def _compute(self, pairs: np.ndarray) -> None:
        """Per-worker mean entropy of the given pair indices in one grouped pass."""
        todo = [int(p) for p in pairs if (int(p) not in self._cache)]
        if not todo:
            return
        rows, groups, offs = [], [], [0]
        for p in todo:
            r = self._order[self._start[p]:self._stop[p]]
            rows.append(r)
            offs.append(offs[-1] + 1)
        wmax = [int(self._worker[r].max()) + 1 for r in rows]
        base = np.concatenate([[0], np.cumsum(wmax)])
        for i, r in enumerate(rows):
            groups.append(base[i] + self._worker[r])
        idx = np.concatenate(rows)
        g = np.concatenate(groups)
        logits = self.table.column("logits").take(pa.array(idx))
        means = grouped_mean_entropy(logits, g, impl=self.impl, n_groups=int(base[-1]))
        for i, p in enumerate(todo):
            self._cache[p] = means[base[i]:base[i + 1]]

    def worker_entropy(self, learning, jids: np.ndarray, epochs: np.ndarray, K: np.ndarray) -> np.ndarray:
        """u[r, k] for job jids[r] at epoch epochs[r] with K[r] workers (LearningState hook)."""
        spec = learning.spec
        if self._bound_models is None:
            self.bind(spec.model_names, learning.jobs.model, np.arange(len(learning.jobs)))
        tmodel = self._bound_models[learning.jobs.model[jids]]
        pidx = self._pair_index(tmodel, epochs)
        miss = np.flatnonzero(pidx < 0)
        if miss.size:
            r = int(miss[0])
            name = self.model_names[tmodel[r]]
            raise TraceError(f"job {int(jids[r])}, epoch {int(epochs[r])}: the logits trace has no "
                             f"epoch {int(epochs[r])} for model {name!r} (it has "
                             f"{self.n_epochs.get(name, 0)} epochs)", file=self.path, field="epoch")
        C = self._classes[pidx]
        bad = np.flatnonzero(C < 0)
        if bad.size:
            r = int(bad[0])
            raise TraceError(f"job {int(jids[r])}, epoch {int(epochs[r])}: logits rows of this "
                             f"epoch have different class counts", file=self.path, field="logits")
        prev = learning.trace_classes[jids]
        change = np.flatnonzero((prev >= 0) & (prev != C))
        if change.size:
            r = int(change[0])
            raise TraceError(f"job {int(jids[r])}, epoch {int(epochs[r])}: the class count changed "
                             f"from {int(prev[r])} to {int(C[r])} within the job", file=self.path,
                             field="logits")
        learning.trace_classes[jids] = C
        self._compute(np.unique(pidx))
        kmax = int(K.max()) if K.size else 1
        out = np.zeros((jids.size, kmax))
        for r in range(jids.size):        # one row per job epoch event, not per worker/sample
            vals = self._cache[int(pidx[r])]
            k = np.arange(int(K[r]))
            u = vals[k % vals.size]
            if np.isnan(u).any():
                raise TraceError(f"job {int(jids[r])}, epoch {int(epochs[r])}: entropy is NaN for "
                                 f"worker {int(k[np.isnan(u)][0])} (NaN/inf logits or no rows)",
                                 file=self.path, field="logits")
            out[r, :k.size] = u
        return out


# ------------------------------------------------------------------ synthetic traces

def _entropy_of_peak(a: np.ndarray, C: int) -> np.ndarray:
    """Normalized entropy of softmax([a, 0, ..., 0]) (C classes)."""
    p1 = 1.0 / (1.0 + (C - 1) * np.exp(-a))
    po = (1.0 - p1) / (C - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(p1 * np.log(p1) + (C - 1) * np.where(po > 0, po * np.log(po), 0.0))
    return np.clip(h / np.log(C), 0.0, 1.0)


def logits_for_entropy(target: np.ndarray, C: int, rng: np.random.Generator) -> np.ndarray:
    """Rows of C logits whose normalized entropy equals ``target`` (one row per value):
    one class ``a`` above the others (a solved by bisection), classes shuffled."""
    t = np.clip(np.asarray(target, float), 1e-6, 1.0 - 1e-9)
    lo, hi = np.zeros_like(t), np.full_like(t, 60.0)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        h = _entropy_of_peak(mid, C)
        lo = np.where(h > t, mid, lo)
        hi = np.where(h > t, hi, mid)
    a = 0.5 * (lo + hi)
    out = np.zeros((t.size, C), np.float32)
    top = rng.integers(0, C, size=t.size)
    out[np.arange(t.size), top] = a
    return out


def synthetic_logits_trace(path, models: Sequence[str], n_epochs: int, n_workers: int,
                           n_classes: int, curve: Callable[[np.ndarray], np.ndarray] | np.ndarray,
                           rows_per_worker: int = 64, sigma_d: float = 0.2, jitter: float = 0.05,
                           seed: int = 0) -> Path:
    """Write a logits trace whose per-(model, epoch, worker) mean entropy is
    ``clip(curve(epoch) * d_w, 0, 1)`` with ``d_w ~ LogNormal(0, sigma_d)`` per (model, worker)
    (non-IID difficulty); each row's entropy varies by ``+-jitter`` around that mean.

    ``curve``: a function of the epoch array, or an array of n_epochs values.
    Returns the path (an Arrow IPC file).
    """
    if n_epochs < 1 or n_workers < 1 or n_classes < 2 or rows_per_worker < 1:
        raise ConfigError("need n_epochs, n_workers, rows_per_worker >= 1 and n_classes >= 2")
    rng = np.random.Generator(np.random.PCG64(seed))
    ep = np.arange(n_epochs)
    H = np.asarray(curve(ep) if callable(curve) else curve, float)
    if H.shape != (n_epochs,):
        raise ConfigError(f"curve gives {H.shape} values for {n_epochs} epochs")
    path = Path(path)
    schema = pa.schema([("model", pa.string()), ("epoch", pa.int32()), ("worker", pa.int32()),
                        ("logits", pa.list_(pa.float32(), n_classes))])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for m in models:
            d = np.exp(sigma_d * rng.standard_normal(n_workers))
            for e in range(n_epochs):
                mean = np.clip(H[e] * d, 0.0, 1.0)
                tgt = np.repeat(mean, rows_per_worker)
                # jitter symmetric within each worker keeps its mean (up to clipping)
                half = rng.uniform(-jitter, jitter, size=(n_workers, (rows_per_worker + 1) // 2))
                jit = np.concatenate([half, -half], axis=1)[:, :rows_per_worker].ravel()
                x = logits_for_entropy(np.clip(tgt + jit, 0.0, 1.0), n_classes, rng)
                n = x.shape[0]
                writer.write_batch(pa.record_batch([
                    pa.array([m] * n, pa.string()), pa.array(np.full(n, e, np.int32)),
                    pa.array(np.repeat(np.arange(n_workers, dtype=np.int32), rows_per_worker)),
                    pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), n_classes)],
                    schema=schema))
    return path
