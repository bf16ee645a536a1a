"""calib.toml (fitted parameters) and the throughput oracle built on it.

``calib.toml`` holds one ``[[fit]]`` table per (model, GPU type, kind)::

    [calibration]
    format = "clustersim-calibration"
    version = 1
    created = "2026-11-29T14:00:00+00:00"
    sources = ["profiles/pollux"]

    [[fit]]
    model = "bert"
    gpu_type = "t4"
    kind = "pollux"                  # or "hops"
    params = { alpha_c = 0.176, beta_c = 0.058, alpha_n = 1.33, beta_n = 0.0091,
               alpha_r = 0.256, beta_r = 0.0032, gamma = 1.72 }
    n_points = 720                   # measurements fitted
    median_ape = 4.3                 # in-sample step-time error, percent
    p90_ape = 16.2
    local_bsz_range = [4, 12]        # batch sizes measured (the largest is the memory limit)
    local_bsz_median = 8             # the oracle's default per-GPU batch
    gpu_counts = [1, 2, 3, 4, 6, 8]
    max_nodes = 16
    pinned = ["..."]                 # parameters no measurement could determine
    warnings = ["..."]

:class:`CalibratedThroughput` implements :class:`sim.throughput.ThroughputOracle` from those fits:
the rate of a job on ``K`` GPUs over ``N`` servers of type ``t`` is ``1 / T_iter`` iterations/s,
with ``T_iter`` the fitted model at the job's per-GPU batch ``b`` (fixed as the GPU count changes,
as in Gavel's table).  A batch above the largest measured on that type runs as Pollux/Sia do,
with ``s = ceil(b / b_max) - 1`` accumulation steps of ``ceil(b / (s + 1))`` samples.  Placements
over several types run at the slowest type, times the slowest server's speed factor (as
:class:`~sim.throughput.TableThroughput`).  A (model, type) without a fit is projected from the
model's fit on a base type (the reference type if fitted) by the median, over models fitted on
both types, of their 1-GPU rate ratio (Sia's ``cluster_throughput_ratios``); if no model was
fitted on both, by :data:`~sim.throughput.RELATIVE_SPEED`.

The engine hands the oracle GPU and server counts, not the GPUs per server, so the Pollux model's
per-server contention term (``beta_l``) is evaluated at an even spread, ``ceil(K / N)`` GPUs on
the busiest server; a consolidated placement such as 8+4 is predicted as 6+6.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..cluster import canonical_gpu_type
from ..errors import ConfigError
from ..fsio import read_text_file
from ..throughput import (DEFAULT_RESTART_DELAY_S, REFERENCE_TYPE, RELATIVE_SPEED, RESTART_DELAY_S,
                          ModelLookup, restart_delay_s)
from .fit import FitResult
from .models import KINDS, PolluxParams, hops_iter_time, params_from_dict, pollux_iter_time

__all__ = ["write_calibration", "read_calibration", "calibration_toml", "CalibratedThroughput", "FORMAT"]

FORMAT = "clustersim-calibration"
_BATCH_RE = re.compile(r"\(batch size (\d+)\)", re.IGNORECASE)


# ----------------------------------------------------------------------------- TOML
def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return repr(f)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def calibration_toml(fits: Sequence[FitResult], *, sources: Sequence[str] = (), created: str | None = None) -> str:
    """The calib.toml text of some fits."""
    created = created or _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    out = ["# clustersim calibration: fitted step-time models (docs/calibration.md).",
           "# Load with sim.calibration.CalibratedThroughput.from_toml(path).", "",
           "[calibration]", f"format = {_toml_value(FORMAT)}", "version = 1", f"created = {_toml_value(created)}",
           f"sources = {_toml_value([str(s) for s in sources])}", ""]
    for f in sorted(fits, key=lambda r: (r.model, r.gpu_type, r.kind)):
        out += ["[[fit]]", f"model = {_toml_value(f.model)}", f"gpu_type = {_toml_value(f.gpu_type)}",
                f"kind = {_toml_value(f.kind)}", f"params = {_toml_value(f.params.as_dict())}",
                f"n_points = {f.n_points}", f"median_ape = {_toml_value(round(f.median_ape, 3))}",
                f"p90_ape = {_toml_value(round(f.p90_ape, 3))}",
                f"local_bsz_range = {_toml_value(list(f.local_bsz_range))}",
                f"local_bsz_median = {f.local_bsz_median}", f"gpu_counts = {_toml_value(list(f.gpu_counts))}",
                f"max_nodes = {f.max_nodes}", f"pinned = {_toml_value(sorted(f.pinned))}",
                f"warnings = {_toml_value(list(f.warnings))}", ""]
    return "\n".join(out)


def write_calibration(fits: Sequence[FitResult], path, *, sources: Sequence[str] = ()) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(calibration_toml(fits, sources=sources))
    return path


def read_calibration(path) -> list[FitResult]:
    """Fits stored in a calib.toml (errors name the file and the ``[[fit]]`` entry)."""
    path = Path(path)
    text = read_text_file(path, "calibration file")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"calibration file {path}: invalid TOML: {exc}") from None
    head = doc.get("calibration", {})
    if head.get("format") != FORMAT:
        raise ConfigError(f"calibration file {path}: [calibration] format must be {FORMAT!r}")
    fits = doc.get("fit", [])
    if not fits:
        raise ConfigError(f"calibration file {path}: no [[fit]] entries")
    out = []
    for i, e in enumerate(fits):
        where = f"calibration file {path}, [[fit]] #{i}"
        for key in ("model", "gpu_type", "kind", "params"):
            if key not in e:
                raise ConfigError(f"{where}: missing {key!r}")
        where += f" ({e['model']} on {e['gpu_type']}, {e['kind']})"
        try:
            params = params_from_dict(e["kind"], e["params"])
        except (ConfigError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
        arr = params.as_array()
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ConfigError(f"{where}: parameters must be finite and >= 0")
        if isinstance(params, PolluxParams) and not 1.0 <= params.gamma <= 10.0:
            raise ConfigError(f"{where}: gamma must be in [1, 10], got {params.gamma}")
        rng = e.get("local_bsz_range", [1, 1])
        out.append(FitResult(e["kind"], str(e["model"]), canonical_gpu_type(e["gpu_type"]), params,
                             int(e.get("n_points", 0)), pinned={p: "" for p in e.get("pinned", [])},
                             warnings=list(e.get("warnings", [])), median_ape=float(e.get("median_ape", "nan")),
                             p90_ape=float(e.get("p90_ape", "nan")), local_bsz_range=(int(rng[0]), int(rng[1])),
                             local_bsz_median=int(e.get("local_bsz_median", rng[0])),
                             gpu_counts=tuple(int(k) for k in e.get("gpu_counts", [1])),
                             max_nodes=int(e.get("max_nodes", 1))))
    return out


# ----------------------------------------------------------------------------- oracle
def _iter_time(kind: str, th: np.ndarray, pattern: np.ndarray, nonoverlap: np.ndarray, b, nn, k, s) -> np.ndarray:
    if kind == "pollux":
        return pollux_iter_time(th, b, nn, k, s)
    return hops_iter_time(th, b, nn, k, s, pattern=pattern, nonoverlap=nonoverlap)


class CalibratedThroughput(ModelLookup):
    """A :class:`~sim.throughput.ThroughputOracle` from fitted step-time models.

    Args:
        fits: fitted models (:func:`read_calibration`, or :func:`sim.calibration.fit.fit_all`).
        kind: which fitted model to use: ``"pollux"``, ``"hops"`` or ``"best"`` (per (model, type),
            the lower in-sample median error).
        local_bsz: per-GPU batch of each model (default: the ``(batch size N)`` of its name, else the
            median batch measured on its base type).
        reference_type: the type durations refer to (default: v100 if every model was fitted on it,
            else the type with the most fitted models).
        relative_speed, restart_delays, default_restart_delay_s: as :class:`~sim.throughput.TableThroughput`.
    """

    _kind = "calibration"

    def __init__(self, fits: Sequence[FitResult], *, kind: str = "pollux",
                 local_bsz: Mapping[str, int] | None = None, reference_type: str | None = None,
                 relative_speed: Mapping[str, float] | None = None,
                 restart_delays: Mapping[str, float] | None = None,
                 default_restart_delay_s: float = DEFAULT_RESTART_DELAY_S, source: str = "<memory>"):
        if kind not in KINDS + ("best",):
            raise ConfigError(f"unknown model kind {kind!r} (known: {', '.join(KINDS)}, best)")
        self.source = source
        self.kind_requested = kind
        chosen: dict[tuple[str, str], FitResult] = {}
        for f in fits:
            key = (f.model, canonical_gpu_type(f.gpu_type))
            if kind != "best" and f.kind != kind:
                continue
            old = chosen.get(key)
            if old is None or (kind == "best" and f.median_ape < old.median_ape):
                chosen[key] = f
        if not chosen:
            raise ConfigError(f"calibration {source}: no {kind} fits")
        kinds = {f.kind for f in chosen.values()}
        self._fits = chosen
        self.models: tuple[str, ...] = tuple(sorted({m for m, _ in chosen}))
        self.gpu_types: tuple[str, ...] = tuple(sorted({t for _, t in chosen}))
        self._model_index = {m: i for i, m in enumerate(self.models)}
        self.relative_speed = {canonical_gpu_type(k): float(v)
                               for k, v in (RELATIVE_SPEED if relative_speed is None else relative_speed).items()}
        self.restart_delays = dict(RESTART_DELAY_S if restart_delays is None else restart_delays)
        self.default_restart_delay_s = float(default_restart_delay_s)
        count = {t: sum(1 for (_, tt) in chosen if tt == t) for t in self.gpu_types}
        if reference_type is None:
            best = max(count.values())
            cands = [t for t in self.gpu_types if count[t] == best]
            reference_type = REFERENCE_TYPE if REFERENCE_TYPE in cands else cands[0]
        self.reference_type = canonical_gpu_type(reference_type)
        if self.reference_type not in self.gpu_types and self.reference_type not in self.relative_speed:
            raise ConfigError(f"reference type {reference_type!r} is neither calibrated "
                              f"({', '.join(self.gpu_types)}) nor in the relative-speed table")
        # per-model base type and batch
        self._base = {}
        self._bsz = {}
        for m in self.models:
            types = [t for (mm, t) in chosen if mm == m]
            self._base[m] = self.reference_type if self.reference_type in types else sorted(types)[0]
            b = (local_bsz or {}).get(m)
            if b is None:
                hit = _BATCH_RE.search(m)
                b = int(hit.group(1)) if hit else chosen[(m, self._base[m])].local_bsz_median
            if int(b) < 1:
                raise ConfigError(f"local batch of model {m!r} must be >= 1, got {b}")
            self._bsz[m] = int(b)
        self._mixed = len(kinds) > 1
        self._cache: dict[tuple[str, ...], list] = {}
        self._ratio_cache: dict[tuple[str, str], float] = {}

    @classmethod
    def from_toml(cls, path, **kwargs) -> "CalibratedThroughput":
        kwargs.setdefault("source", str(path))
        return cls(read_calibration(path), **kwargs)

    # ---------------------------------------------------------------- single evaluations
    def _eval(self, f: FitResult, b: int, nn, k, kmax=None) -> np.ndarray:
        """Iterations/s of a fitted (model, type) at per-GPU batch b (accumulating above b_max)."""
        bmax = max(f.local_bsz_range[1], 1)
        s = max(math.ceil(b / bmax - 1e-9) - 1, 0)
        atomic = math.ceil(b / (s + 1) - 1e-9)
        t = f.params.step_time(atomic, nn, k, s, kmax)
        return 1.0 / np.asarray(t, float)

    def _ratio(self, t: str, base: str) -> float:
        """Speed of type t relative to base (see the module docstring)."""
        if t == base:
            return 1.0
        key = (t, base)
        if key in self._ratio_cache:
            return self._ratio_cache[key]
        rs = [float(self._eval(self._fits[(m, t)], self._bsz[m], 1, 1)
                    / self._eval(self._fits[(m, base)], self._bsz[m], 1, 1))
              for m in self.models if (m, t) in self._fits and (m, base) in self._fits]
        if rs:
            r = float(np.median(rs))
        elif t in self.relative_speed and base in self.relative_speed:
            r = self.relative_speed[t] / self.relative_speed[base]
        else:
            raise ConfigError(f"GPU type {t!r} is neither calibrated ({', '.join(self.gpu_types)}) nor in the "
                              f"relative-speed table, and no model was measured on both it and {base!r}")
        self._ratio_cache[key] = r
        return r

    def _column(self, m: str, t: str) -> tuple[FitResult, float]:
        """(fit used, multiplier) for model m on type t."""
        f = self._fits.get((m, t))
        if f is not None:
            return f, 1.0
        base = self._base[m]
        return self._fits[(m, base)], self._ratio(t, base)

    def step_time(self, model, gpu_type: str, n_gpus, n_nodes=1, local_bsz: int | None = None,
                  max_per_node=None) -> np.ndarray:
        """Predicted seconds per iteration of ``model`` on ``gpu_type``; ``max_per_node`` (most GPUs
        on one server) defaults to an even spread."""
        m = self.models[self.model_index(model)]
        f, r = self._column(m, canonical_gpu_type(gpu_type))
        b = self._bsz[m] if local_bsz is None else int(local_bsz)
        return 1.0 / (self._eval(f, b, np.asarray(n_nodes, float), np.asarray(n_gpus, float),
                                 max_per_node) * r)

    # ---------------------------------------------------------------- protocol
    def supported_counts(self, model) -> tuple[int, ...]:
        m = self.models[self.model_index(model)]
        return tuple(self._fits[(m, self._base[m])].gpu_counts)

    def restart_delay_s(self, model) -> float:
        name = self.models[self.model_index(model)]
        return restart_delay_s(name, self.restart_delays, self.default_restart_delay_s)

    def _columns(self, cluster_types: tuple[str, ...]) -> list:
        """Per cluster type: parameter matrix, pattern, nonoverlap, batch, accum steps, multiplier."""
        key = tuple(cluster_types)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        cols = []
        for name in key:
            t = canonical_gpu_type(name)
            per_kind: dict[str, dict] = {}
            for mi, m in enumerate(self.models):
                f, r = self._column(m, t)
                bmax = max(f.local_bsz_range[1], 1)
                b = self._bsz[m]
                s = max(math.ceil(b / bmax - 1e-9) - 1, 0)
                atomic = math.ceil(b / (s + 1) - 1e-9)
                d = per_kind.setdefault(f.kind, {"rows": [], "th": [], "pat": [], "no": [], "b": [], "s": [], "r": []})
                d["rows"].append(mi)
                d["th"].append(f.params.as_array())
                d["pat"].append(getattr(f.params, "pattern", 2))
                d["no"].append(getattr(f.params, "nonoverlap", 0.2))
                d["b"].append(atomic)
                d["s"].append(s)
                d["r"].append(r)
            M = len(self.models)
            kind_of = np.zeros(M, np.int64)
            tabs = {}
            for ki, (kind, d) in enumerate(sorted(per_kind.items())):
                rows = np.array(d["rows"], np.intp)
                kind_of[rows] = ki
                n_par = len(d["th"][0])
                th = np.zeros((M, n_par))
                th[rows] = np.array(d["th"])
                arrs = {}
                for nm in ("pat", "no", "b", "s", "r"):
                    a = np.zeros(M)
                    a[rows] = np.array(d[nm], float)
                    arrs[nm] = a
                tabs[kind] = (ki, th, arrs)
            cols.append((kind_of, tabs))
        self._cache[key] = cols
        return cols

    def _rates_on(self, col, m, nn, k) -> np.ndarray:
        kind_of, tabs = col
        out = np.empty(m.shape)
        for kind, (ki, th, a) in tabs.items():
            sel = kind_of[m] == ki
            if not sel.any():
                continue
            mm = m[sel]
            t = _iter_time(kind, th[mm], a["pat"][mm], a["no"][mm], a["b"][mm], nn[sel], k[sel], a["s"][mm])
            out[sel] = a["r"][mm] / t
        return out

    def rates(self, model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types: tuple[str, ...]) -> np.ndarray:
        shape, m, k, nn, mask, sp, nct = self._rate_args(model_idx, ngpu, n_nodes, type_mask,
                                                         min_speed, cluster_types)
        cols = self._columns(tuple(cluster_types))
        kk = np.maximum(k, 1).astype(float)
        nnf = np.maximum(nn, 1).astype(float)
        out = np.full(m.shape, np.inf)
        for t in range(nct):
            used = ((mask >> t) & 1).astype(bool)
            if not used.any():
                continue
            idx = np.flatnonzero(used)
            out[idx] = np.minimum(out[idx], self._rates_on(cols[t], m[idx], nnf[idx], kk[idx]))
        out[~np.isfinite(out) | (k <= 0)] = 0.0
        return (out * sp).reshape(shape)

    def reference_rate(self, model_idx, ngpu) -> np.ndarray:
        m, k = np.broadcast_arrays(np.asarray(model_idx, dtype=np.intp), np.asarray(ngpu, dtype=np.int64))
        shape = m.shape
        m, k = m.ravel(), k.ravel()
        self._check_models(m)
        col = self._columns((self.reference_type,))[0]
        out = self._rates_on(col, m, np.ones(m.shape), np.maximum(k, 1).astype(float))
        out[k <= 0] = 0.0
        return out.reshape(shape)

    def iterations_for_duration(self, model_idx, ngpu, duration_s) -> np.ndarray:
        return np.asarray(duration_s, dtype=np.float64) * self.reference_rate(model_idx, ngpu)

    def __repr__(self) -> str:
        return (f"CalibratedThroughput({len(self.models)} models, types {', '.join(self.gpu_types)}, "
                f"kind {self.kind_requested}, reference {self.reference_type}, source {self.source})")
