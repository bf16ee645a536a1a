"""An application of the Pollux job model: its measured profile, read and checked.

A Pollux profile folder (``<root>/<application>/``, petuum/adaptdl ``simulator/traces/``) holds

* ``validation-<batch>.csv`` (``progress, iteration, metric, grad_sqr, grad_var``): one row per
  epoch of a real training run at that global batch size.  ``progress`` counts steps at the
  initial (smallest) batch size weighted by statistical efficiency, so progress per second is
  ``gain / step_time`` (Pollux); ``grad_sqr`` and ``grad_var`` are the gradient statistics
  measured along the run;
* ``placements.csv`` (``placement, local_bsz, step_time, sync_time``): step times measured on
  placements written as GPUs per node (``22`` = 2 nodes with 2 GPUs each);
* ``scalability.csv`` (``num_nodes, num_replicas, local_bsz, step_time, sync_time``): more step
  times by node and GPU count.

What the authors' simulator takes from them, and so do we (applications.py there):

* **step times** of a placement at a per-GPU batch: linear interpolation in the batch among the
  rows of the same placement (rotations count as one placement); a placement not measured is
  interpolated linearly in (nodes, GPUs, batch) over the placements' means and the scalability
  rows (nodes capped at :data:`MAX_INTERP_NODES`);
* **gradient statistics** at a global batch and epoch: linear interpolation between the two
  validated batch sizes around it;
* **epochs**: epoch ``e`` ends at progress ``min over batch sizes of progress[e - 1]``; a job
  finishes when its epoch passes the completion epoch, ``max_epochs - 1`` (no target metric:
  every workload of both papers), i.e. at the progress where epoch ``max_epochs`` starts.

Bad profiles raise :class:`~sim.errors.TraceError` naming the file (and the job, when a job asks).
"""
from __future__ import annotations

import os
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv

from ..errors import ConfigError, TraceError

__all__ = ["Application", "load_applications", "shared_profiles_dir", "APPLICATION_DEFAULTS",
           "MAX_INTERP_NODES"]

#: Per-application settings of the authors' simulators (applications.py ``APPLICATIONS``):
#: epochs trained, and the per-GPU batch cap where it is not the profile's largest.
APPLICATION_DEFAULTS: dict[str, dict] = {
    "bert": {"max_epochs": 2},
    "cifar10": {"max_epochs": 100},
    "ncf": {"max_epochs": 10},
    "imagenet": {"max_epochs": 90},
    "deepspeech2": {"max_epochs": 80},
    "yolov3": {"max_epochs": 50, "max_local_bsz": 8},
}

#: Node counts above this are clamped before interpolating an unmeasured placement (the
#: authors' ``min(num_nodes, 16)``: the profiles go up to 16 nodes).
MAX_INTERP_NODES = 16

_VALIDATION_RE = re.compile(r"^validation-(\d+)\.csv$")
_VALIDATION_COLS = ("progress", "iteration", "grad_sqr", "grad_var")
_PLACEMENT_COLS = ("placement", "local_bsz", "step_time", "sync_time")
_SCALABILITY_COLS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")


def shared_profiles_dir(kind: str = "pollux") -> Path | None:
    """``$CLUSTERSIM_SHARED_DATA/profiles/<kind>`` or ``../shared/data/profiles/<kind>`` (from the
    working directory or this checkout), or None when neither exists."""
    return _shared_dir("profiles", kind)


def shared_workloads_dir(kind: str = "pollux") -> Path | None:
    """``workloads/<kind>`` of the same shared data folder (the papers' workload CSVs), or None."""
    return _shared_dir("workloads", kind)


def _shared_dir(what: str, kind: str) -> Path | None:
    roots = [os.environ.get("CLUSTERSIM_SHARED_DATA")]
    roots += [Path.cwd().parent / "shared" / "data", Path(__file__).resolve().parents[3] / "shared" / "data"]
    for root in roots:
        if root and (Path(root) / what / kind).is_dir():
            return Path(root) / what / kind
    return None


def _read_columns(path: Path, cols: tuple[str, ...]) -> dict[str, np.ndarray]:
    if not path.exists():
        raise TraceError("profile file is missing", file=str(path))
    try:
        table = pacsv.read_csv(path)
    except Exception as exc:      # pyarrow's errors name no file
        raise TraceError(f"cannot read profile: {exc}", file=str(path)) from None
    missing = [c for c in cols if c not in table.column_names]
    if missing:
        raise TraceError(f"profile lacks columns {missing}", file=str(path))
    if table.num_rows == 0:
        raise TraceError("profile is empty", file=str(path))
    out = {}
    for c in cols:
        a = table.column(c).to_numpy(zero_copy_only=False)
        if c == "placement":
            a = np.asarray([str(v) for v in a])
        else:
            a = np.asarray(a, float)
            if not np.all(np.isfinite(a)):
                raise TraceError("non-finite value", file=str(path), field=c)
        out[c] = a
    return out


def _check_validation(path: Path, v: dict[str, np.ndarray]) -> None:
    for c in ("progress", "iteration"):
        bad = np.flatnonzero(np.diff(v[c]) < 0)
        if bad.size:
            raise TraceError(f"{c} decreases ({v[c][bad[0]]:g} then {v[c][bad[0] + 1]:g}); the profile "
                             f"must be monotone", file=str(path), row=int(bad[0]) + 3, field=c)
    if np.any(v["progress"] <= 0):
        raise TraceError("progress must be > 0", file=str(path), field="progress")


def _check_times(path: Path, d: dict[str, np.ndarray]) -> None:
    if np.any(d["step_time"] <= 0) or np.any(d["sync_time"] < 0) or np.any(d["sync_time"] >= d["step_time"]):
        raise TraceError("need step_time > sync_time >= 0", file=str(path), field="step_time")
    if np.any(d["local_bsz"] < 1):
        raise TraceError("local_bsz must be >= 1", file=str(path), field="local_bsz")


def _canonical_placement(counts) -> int:
    """The lexicographically smallest rotation of the non-zero per-node counts, as digits."""
    p = tuple(int(c) for c in counts if c)
    p = min(p[i:] + p[:i] for i in range(len(p)))
    return int("".join(map(str, p)))


@dataclass(eq=False)
class Application:
    """One application's profile; see the module docstring.  Build with :meth:`load`."""

    name: str
    folder: Path
    batch_sizes: np.ndarray            # validated global batch sizes, increasing (int64)
    progress: np.ndarray               # [n_batch, n_rows] cumulative progress per epoch
    iteration: np.ndarray              # [n_batch, n_rows]
    grad_sqr: np.ndarray               # [n_batch, n_rows]
    grad_var: np.ndarray               # [n_batch, n_rows]
    placements: dict                   # canonical placement id -> (local_bsz, step, sync) sorted
    interp_points: np.ndarray          # [m, 3] (nodes, GPUs, local batch) for unmeasured placements
    interp_values: np.ndarray          # [m, 2] (step, sync)
    max_epochs: int
    min_local_bsz: int
    max_local_bsz: int
    suffix: str | None = None          # Sia's per-GPU-type profile files (``placements-<suffix>.csv``)
    #: [m, 3] the scalability rows' (nodes, GPUs, local batch) (Sia's per-placement batch limit)
    scalability_keys: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)), repr=False)
    _cache: dict = field(default_factory=dict, repr=False)
    _interp: object = field(default=None, repr=False)
    _bsz_of_gpus: dict = field(default_factory=dict, repr=False)
    _batch_floats: tuple = field(default=(), repr=False)
    _epoch_starts: np.ndarray | None = field(default=None, init=False, repr=False)

    # -- loading -----------------------------------------------------------
    @classmethod
    def load(cls, folder, *, name: str | None = None, max_epochs: int | None = None,
             max_local_bsz: int | None = None, suffix: str | None = None,
             defaults: dict | None = None) -> "Application":
        """``suffix``: read ``placements-<suffix>.csv`` and ``scalability-<suffix>.csv`` (Sia's
        per-GPU-type profiles, e.g. ``aws``) instead of ``placements.csv``/``scalability.csv``;
        ``defaults``: per-application settings replacing :data:`APPLICATION_DEFAULTS`."""
        folder = Path(folder)
        name = name or folder.name
        defaults = (APPLICATION_DEFAULTS if defaults is None else defaults).get(name, {})
        if not folder.is_dir():
            raise TraceError(f"application {name!r} has no profile folder", file=str(folder))
        files = sorted(((int(m.group(1)), folder / f) for f in os.listdir(folder)
                        if (m := _VALIDATION_RE.match(f))))
        if not files:
            raise TraceError(f"application {name!r}: no validation-<batch>.csv", file=str(folder))
        runs = []
        for _, path in files:
            v = _read_columns(path, _VALIDATION_COLS)
            _check_validation(path, v)
            runs.append(v)
        n_rows = min(len(r["progress"]) for r in runs)
        epochs = int(max_epochs or defaults.get("max_epochs") or n_rows)
        if epochs > n_rows:
            short = files[int(np.argmin([len(r["progress"]) for r in runs]))][1]
            raise TraceError(f"application {name!r} trains {epochs} epochs but the run has {n_rows} rows",
                             file=str(short))
        stack = {c: np.stack([r[c][:n_rows] for r in runs]) for c in _VALIDATION_COLS}
        tail = f"-{suffix}.csv" if suffix else ".csv"
        pl_path, sc_path = folder / f"placements{tail}", folder / f"scalability{tail}"
        pl = _read_columns(pl_path, _PLACEMENT_COLS)
        _check_times(pl_path, pl)
        sc = _read_columns(sc_path, _SCALABILITY_COLS) if sc_path.exists() else None
        if sc is not None:
            _check_times(sc_path, sc)
        placements, points, values = _placement_tables(pl, sc, pl_path)
        max_local = int(max_local_bsz or defaults.get("max_local_bsz") or pl["local_bsz"].max())
        return cls(name=name, folder=folder, batch_sizes=np.array([b for b, _ in files], np.int64),
                   progress=stack["progress"], iteration=stack["iteration"], grad_sqr=stack["grad_sqr"],
                   grad_var=stack["grad_var"], placements=placements, interp_points=points,
                   interp_values=values, max_epochs=epochs, min_local_bsz=int(pl["local_bsz"].min()),
                   max_local_bsz=max_local, suffix=suffix,
                   scalability_keys=np.zeros((0, 3)) if sc is None else
                   np.stack([sc["num_nodes"], sc["num_replicas"], sc["local_bsz"]], 1).astype(float))

    # -- batch sizes and epochs -------------------------------------------
    @property
    def init_batch_size(self) -> int:
        return int(self.batch_sizes[0])

    @property
    def max_batch_size(self) -> int:
        return int(self.batch_sizes[-1])

    @property
    def epoch_progress(self) -> np.ndarray:
        """Progress at which each epoch 0..max_epochs starts (float64, ``max_epochs + 1``; computed
        once, read-only)."""
        if self._epoch_starts is None:
            starts = np.concatenate([[0.0], self.progress[:, :self.max_epochs].min(axis=0)])
            starts.flags.writeable = False
            self._epoch_starts = starts
        return self._epoch_starts

    @property
    def target_progress(self) -> float:
        """Progress at which the job is done (the start of epoch ``max_epochs``)."""
        return float(self.epoch_progress[-1])

    def check_batch(self, batch, job: str = "") -> None:
        """A global batch size outside the validated range is an error naming the job and folder."""
        b = np.atleast_1d(np.asarray(batch, float))
        bad = np.flatnonzero((b < self.init_batch_size) | (b > self.max_batch_size))
        if bad.size:
            who = f"job {job}: " if job else ""
            raise TraceError(f"{who}batch size {b[bad[0]]:g} of {self.name!r} is outside the profile's "
                             f"validated range [{self.init_batch_size}, {self.max_batch_size}]",
                             file=str(self.folder))

    def _batch_weights(self, batch):
        """Validated sizes below/above each batch and the weight of the upper one (linear)."""
        b = np.clip(np.asarray(batch, float), self.init_batch_size, self.max_batch_size)
        bs = self.batch_sizes.astype(float)
        hi = np.clip(np.searchsorted(bs, b, "left"), 0, len(bs) - 1)
        lo = np.where(bs[hi] == b, hi, np.maximum(hi - 1, 0))
        w = np.where(hi == lo, 0.0, (b - bs[lo]) / np.where(hi == lo, 1.0, bs[hi] - bs[lo]))
        return lo, hi, w

    def _at(self, table: np.ndarray, batch, epoch) -> np.ndarray:
        if np.ndim(batch) == 0 and np.ndim(epoch) == 0:
            return self._at_one(table, float(batch), int(epoch))
        lo, hi, w = self._batch_weights(batch)
        e = np.clip(np.asarray(epoch, np.int64), 0, table.shape[1] - 1)
        return (1 - w) * table[lo, e] + w * table[hi, e]

    def _at_one(self, table: np.ndarray, b: float, epoch: int) -> np.float64:
        """:meth:`_at` of one batch and epoch: the same operations on scalars (the job model asks
        once per job and decision; the array path costs about 20x more per call)."""
        if not self._batch_floats:
            self._batch_floats = tuple(float(x) for x in self.batch_sizes)
        bs = self._batch_floats
        b = min(max(b, bs[0]), bs[-1])
        hi = min(bisect_left(bs, b), len(bs) - 1)
        lo = hi if bs[hi] == b else max(hi - 1, 0)
        w = 0.0 if hi == lo else (b - bs[lo]) / (bs[hi] - bs[lo])
        e = min(max(epoch, 0), table.shape[1] - 1)
        return (1 - w) * table[lo, e] + w * table[hi, e]

    def grad_stats(self, batch, epoch) -> tuple[np.ndarray, np.ndarray]:
        """(grad_sqr, grad_var) at global ``batch`` during ``epoch``: linear in the batch between
        the validated sizes around it (vectorized)."""
        return self._at(self.grad_sqr, batch, epoch), self._at(self.grad_var, batch, epoch)

    def iterations(self, batch, epoch) -> np.ndarray:
        """Iterations after ``epoch`` epochs at global ``batch`` (linear between validated sizes)."""
        return self._at(self.iteration, batch, epoch)

    # -- Sia's per-placement batch limits ----------------------------------
    def max_local_bsz_at(self, counts) -> float:
        """Largest per-GPU batch of placement ``counts`` (GPUs per node), as the Sia simulator's
        ``get_max_local_bsz``: the measured placement's largest batch, else the largest batch of
        the scalability rows with at least as many nodes and GPUs (nan if none)."""
        row = self.placements.get(_canonical_placement(counts))
        if row is not None:
            return float(row[0][-1])
        k = self.scalability_keys
        n, r = sum(1 for c in counts if c), sum(int(c) for c in counts)
        sel = (k[:, 0] >= n) & (k[:, 1] >= r)
        return float(k[sel, 2].max()) if sel.any() else float("nan")

    def max_local_bsz_of_gpus(self, r: int) -> float | None:
        """Largest per-GPU batch measured on any placement of ``r`` GPUs (None if none): the Sia
        simulator's memory cap on a fixed-batch job's atomic batch (``update_local_bsz``)."""
        if r not in self._bsz_of_gpus:
            best = None
            for pid, (x, _, _) in self.placements.items():
                if sum(int(ch) for ch in str(pid)) == r:
                    best = float(x[-1]) if best is None else max(best, float(x[-1]))
            self._bsz_of_gpus[r] = best
        return self._bsz_of_gpus[r]

    # -- step times --------------------------------------------------------
    def step_times(self, counts, local_bsz: float) -> tuple[float, float]:
        """(step, sync) seconds of a placement (GPUs per node) at per-GPU batch ``local_bsz``."""
        pid = _canonical_placement(counts)
        key = (pid, float(local_bsz))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._step_times(pid, counts, float(local_bsz))
            self._cache[key] = hit
        return hit

    def _step_times(self, pid: int, counts, b: float) -> tuple[float, float]:
        row = self.placements.get(pid)
        if row is not None:
            x, step, sync = row
            if not x[0] <= b <= x[-1]:
                raise TraceError(f"{self.name}: per-GPU batch {b:g} outside the measured range "
                                 f"[{x[0]:g}, {x[-1]:g}] of placement {pid}",
                                 file=str(self.folder / "placements.csv"))
            return float(np.interp(b, x, step)), float(np.interp(b, x, sync))
        if self._interp is None:
            from scipy.interpolate import LinearNDInterpolator
            self._interp = LinearNDInterpolator(self.interp_points, self.interp_values)
        nodes = min(sum(1 for c in counts if c), MAX_INTERP_NODES)
        step, sync = self._interp([nodes, sum(int(c) for c in counts), b])[0]
        if not (np.isfinite(step) and np.isfinite(sync)):
            raise TraceError(f"{self.name}: placement {pid} at per-GPU batch {b:g} lies outside the "
                             f"measured placements and scalability rows", file=str(self.folder))
        return float(step), float(sync)


def _placement_tables(pl: dict, sc: dict | None, path: Path):
    """Measured placements by canonical id, and the interpolation points for the others: the
    mean step/sync of each (nodes, GPUs, batch) over the placements, then the scalability rows."""
    digits = [[int(ch) for ch in p] for p in pl["placement"]]
    if any(not d or min(d) < 1 for d in digits):
        raise TraceError("placement must be digits 1-9 (GPUs per node)", file=str(path), field="placement")
    pid = np.array([_canonical_placement(d) for d in digits])
    placements = {}
    for p in np.unique(pid):
        m = pid == p
        order = np.argsort(pl["local_bsz"][m], kind="stable")
        placements[int(p)] = tuple(pl[c][m][order] for c in ("local_bsz", "step_time", "sync_time"))
    nodes = np.array([len(d) for d in digits], float)
    gpus = np.array([sum(d) for d in digits], float)
    keys = np.stack([nodes, gpus, pl["local_bsz"]], 1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    vals = np.stack([np.bincount(inv, pl[c]) / np.bincount(inv) for c in ("step_time", "sync_time")], 1)
    if sc is not None:
        uniq = np.concatenate([uniq, np.stack([sc["num_nodes"], sc["num_replicas"], sc["local_bsz"]], 1)])
        vals = np.concatenate([vals, np.stack([sc["step_time"], sc["sync_time"]], 1)])
    return placements, uniq, vals


def load_applications(root, names=None) -> dict[str, Application]:
    """Applications of a profile root (every sub-folder with validation runs, or ``names``)."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"profile folder {root} does not exist")
    if names is None:
        names = sorted(d.name for d in root.iterdir() if d.is_dir() and any(d.glob("validation-*.csv")))
    return {n: Application.load(root / n) for n in names}
