"""The throughput oracle: how fast a job progresses on a placement.

One interface, :class:`ThroughputOracle`, gives the progress rate (iterations/s of the whole job)
of many placements at once; later back-ends (Pollux/Sia goodput, Hops' estimator) implement the
same protocol.  The first implementation, :class:`TableThroughput`, reads Gavel's measured
throughput table (``simulation_throughputs.json``) and applies these rules:

* **Slowest worker**: a placement that uses several GPU types runs at the rate of its slowest type,
  ``rate = min_{t used} T[model][t][k] * min_speed`` with ``k`` the job's GPU count and
  ``min_speed`` the smallest speed factor of the servers it uses (Hops' server-entity
  heterogeneity; algorithms.md §4.3: "the slowest GPU dominates").
* **Spread** (``multi_server="measured"``, the default): when a placement spans more than one
  node, Gavel's ``<type>_unconsolidated`` measurement is used where the table has it; otherwise
  the consolidated rate is multiplied by ``spread_penalty`` (default :data:`SPREAD_PENALTY`).
  ``multi_server="gavel"`` is Gavel's simulator's rule (its fidelity mode): the consolidated
  rate whatever the servers (Gavel's simulator never reads the ``_unconsolidated`` entries).
* **Counts not measured**: linear interpolation in ``k`` between measured counts (0 if either
  neighbour is a measured 0); below the smallest measured count, the per-GPU rate of that count
  is kept; beyond the largest measured count ``K``, each extra GPU adds ``scaling_efficiency``
  times the per-GPU rate at ``K``: ``r(k) = r(K) * (1 + e * (k - K) / K)`` (continuous at K).
* **GPU types the table lacks**: the reference type's rate scaled by relative speed,
  ``T[t] = T[ref] * speed[t] / speed[ref]``, with ``speed`` from :data:`RELATIVE_SPEED`
  (peak FP32 TFLOPS from vendor spec sheets) unless the caller passes its own.  A type in neither
  the table nor the speed table is a :class:`~sim.errors.ConfigError`.

* **Network**: the rates hold the communication of the network they were measured on
  (``reference_bandwidth_gbps``, default the cluster defaults); on a cluster with other bandwidths
  the engine replaces the ring all-reduce term by the one over the placement's slowest link
  (:mod:`sim.network`, docs/network.md).  Policies read these rates as measured.

A rate of 0 means the job cannot run there (Gavel measured 0, e.g. ResNet-50 with batch 128 on
2+ K80s: out of memory); policies must not place a job where its rate is 0.

Built-in tables (:data:`BUILTIN_TABLES`): ``"gavel"`` (the default) is Gavel's whole
``simulation_throughputs.json`` (26 job types, 492 entries, co-location pairs included;
sim/data/gavel_throughputs.json, MIT licence text in its header); ``"excerpt"`` is the 8-model
excerpt earlier versions shipped as the built-in table (sim/data/builtin_throughputs.json), kept
so results made with it can be reproduced.

**Co-location pairs** (Gavel's space sharing): where the table measured two jobs sharing the same
GPUs, :meth:`TableThroughput.pair_rates` gives both jobs' rates (consolidated types only, at the
measured scale factor; NaN where not measured).  No policy shares GPUs yet.

Restart delays per model (``restart_delay_s``) follow Sia's measured values (algorithms.md §1.3).
"""
from __future__ import annotations

import ast
import json
import math
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Mapping, Protocol, runtime_checkable

import numpy as np
from numba import njit

from .cluster import DEFAULT_INTER_BW_GBPS, DEFAULT_INTRA_BW_GBPS, canonical_gpu_type
from .errors import ConfigError
from .fsio import read_text_file

__all__ = [
    "ThroughputOracle",
    "TableThroughput",
    "default_oracle",
    "SPREAD_PENALTY",
    "MULTI_SERVER_RULES",
    "SCALING_EFFICIENCY",
    "RELATIVE_SPEED",
    "REFERENCE_TYPE",
    "RESTART_DELAY_S",
    "DEFAULT_RESTART_DELAY_S",
    "GAVEL_MODEL_FAMILY",
    "restart_delay_s",
    "model_family",
    "BUILTIN_TABLES",
]

#: How a placement over several servers is rated (TableThroughput's ``multi_server``):
#: "measured" (ours, the default: Gavel's ``_unconsolidated`` measurement, else the consolidated
#: rate x ``spread_penalty``) or "gavel" (Gavel's simulator: the consolidated rate whatever the
#: servers; the fidelity mode of scalability/gavel_fidelity.py).
MULTI_SERVER_RULES = ("measured", "gavel")

#: Multiplier on the consolidated rate of a placement spread over > 1 node when the table has no
#: ``*_unconsolidated`` measurement for that type.  Our choice [I].
SPREAD_PENALTY = 0.8

#: Fraction of the per-GPU rate that each GPU beyond the largest measured count adds.  Our
#: choice [I].
SCALING_EFFICIENCY = 0.8

#: Reference GPU type: durations in job tables are run times on this type (Gavel's
#: ``reference_worker_type='v100'``).
REFERENCE_TYPE = "v100"

#: Relative speed of GPU types the table may lack: peak FP32 TFLOPS (boost clock, no tensor
#: cores) from the vendors' spec sheets.  Only ratios matter.  Caveat: peak FP32 is a crude proxy
#: for training speed (Ampere's doubled FP32 issue rate makes rtx3090/a10 look faster than they
#: train); calibrated back-ends replace it.  k80 counts one GK210 (half a board), as Gavel does.
RELATIVE_SPEED: dict[str, float] = {
    "k80": 4.37,        # Tesla K80, per GK210 GPU (8.73 per board)
    "p100": 9.3,        # Tesla P100 PCIe
    "p40": 11.76,       # Tesla P40
    "v100": 15.7,       # Tesla V100 SXM2
    "t4": 8.1,          # Tesla T4
    "a10": 31.2,        # A10
    "a100": 19.5,       # A100 (SXM4 and PCIe)
    "a800": 19.5,       # A800 (export variant of A100)
    "h100": 66.9,       # H100 SXM5
    "h800": 66.9,       # H800 SXM5 (export variant of H100)
    "gtx1080ti": 11.3,  # GeForce GTX 1080 Ti (reference boost 1582 MHz)
    "titanxp": 12.1,    # TITAN Xp
    "rtx2080ti": 13.4,  # GeForce RTX 2080 Ti (reference boost 1545 MHz)
    "quadrortx6000": 16.3,  # Quadro RTX 6000
    "rtx3090": 35.6,    # GeForce RTX 3090
}

#: Restart/checkpoint delay per model in seconds, measured by Sia [C: siasosp23/artifacts
#: sia-simulator/sia.py get_restart_penalty]; keys are the Pollux/Sia model names.
RESTART_DELAY_S: dict[str, float] = {
    "deepspeech2": 25.0,
    "imagenet": 250.0,
    "cifar10": 30.0,
    "bert": 120.0,
    "yolov3": 45.0,
}
#: Sia's default for other models.
DEFAULT_RESTART_DELAY_S = 30.0

#: Built-in throughput tables: name -> file under sim/data/ (see the module docstring).
BUILTIN_TABLES: dict[str, str] = {"gavel": "gavel_throughputs.json",
                                  "excerpt": "builtin_throughputs.json"}

#: Our mapping [I] of Gavel's model families onto Sia's measured ones: Gavel's ResNet-50 trains on
#: ImageNet and its ResNet-18 on CIFAR-10 (gavel scheduler/job_table.py commands).
GAVEL_MODEL_FAMILY: dict[str, str] = {"resnet-50": "imagenet", "resnet-18": "cifar10"}

_BATCH_RE = re.compile(r"\s*\(batch size \d+\)\s*$", re.IGNORECASE)


def model_family(model: str) -> str:
    """Model name without Gavel's ``" (batch size N)"`` suffix, lowercased."""
    return _BATCH_RE.sub("", model).strip().lower()


def restart_delay_s(model: str, table: Mapping[str, float] | None = None,
                    default: float = DEFAULT_RESTART_DELAY_S) -> float:
    """Restart delay of ``model``: exact name, then its family, then Gavel's family mapping."""
    table = RESTART_DELAY_S if table is None else table
    low = {k.lower(): v for k, v in table.items()}
    fam = model_family(model)
    for key in (model.lower(), fam, GAVEL_MODEL_FAMILY.get(fam, "")):
        if key in low:
            return float(low[key])
    return float(default)


@runtime_checkable
class ThroughputOracle(Protocol):
    """Progress rate of jobs on placements.  All methods are vectorized over jobs.

    ``models`` are the model names (a job's model index points here); ``gpu_types`` are the GPU
    types the oracle has data for (others may still be served, e.g. by relative speed).
    """

    models: tuple[str, ...]
    gpu_types: tuple[str, ...]

    def rates(self, model_idx: np.ndarray, ngpu: np.ndarray, n_nodes: np.ndarray,
              type_mask: np.ndarray, min_speed: np.ndarray,
              cluster_types: tuple[str, ...]) -> np.ndarray:
        """float64 iterations/s of each job's whole placement.

        ``type_mask`` is an int64 bitmask over ``cluster_types`` (bit t set = the placement uses a
        GPU of cluster type t); ``min_speed`` is the smallest speed factor among the servers used.
        A job with ``ngpu <= 0`` or an empty mask gets 0.
        """
        ...

    def reference_rate(self, model_idx: np.ndarray, ngpu: np.ndarray) -> np.ndarray:
        """float64 iterations/s on the reference GPU type, consolidated (duration -> iterations)."""
        ...

    def supported_counts(self, model) -> tuple[int, ...]:
        """GPU counts at which the model was measured (others are interpolated/extrapolated)."""
        ...


def _parse_key(key: str, where: str) -> tuple[str, int]:
    try:
        v = ast.literal_eval(key)
    except (ValueError, SyntaxError):
        v = None
    if not (isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)
            and isinstance(v[1], int) and not isinstance(v[1], bool)):
        raise ConfigError(f"{where}: job type key {key!r} is not of the form \"('<model>', <scale factor>)\"")
    if v[1] < 1:
        raise ConfigError(f"{where}: job type key {key!r} has scale factor {v[1]} (must be >= 1)")
    return v[0], v[1]


def _parse_gavel(doc: Mapping, source: str) -> dict[str, dict[str, dict[int, float]]]:
    """Gavel JSON -> {gpu_type (canonical, '_unconsolidated' kept as suffix): {model: {k: rate}}}."""
    if not isinstance(doc, Mapping) or not doc:
        raise ConfigError(f"throughput file {source}: expected an object of GPU types")
    out: dict[str, dict[str, dict[int, float]]] = {}
    for raw_type, entries in doc.items():
        where = f"throughput file {source}: GPU type {raw_type!r}"
        base, suffix = raw_type, ""
        if raw_type.endswith("_unconsolidated"):
            base, suffix = raw_type[: -len("_unconsolidated")], "_unconsolidated"
        t = canonical_gpu_type(base) + suffix
        if not isinstance(entries, Mapping):
            raise ConfigError(f"{where}: expected an object of job types")
        tab = out.setdefault(t, {})
        for key, val in entries.items():
            model, k = _parse_key(key, where)
            if isinstance(val, Mapping):
                if "null" not in val:
                    raise ConfigError(f"{where}, job type {key!r}: missing the isolated throughput field 'null'")
                r = val["null"]
            else:
                r = val
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r < 0:
                raise ConfigError(f"{where}, job type {key!r}: throughput {r!r} is not a finite number >= 0")
            tab.setdefault(model, {})[k] = float(r)
    return out


def _parse_pairs(doc: Mapping, source: str) -> dict[tuple[str, str, int, str], tuple[float, float]]:
    """Gavel JSON -> {(gpu_type, model, k, other model): (rate of model, rate of other)} for
    the consolidated types (a pair key ``"('<other>', k2)"`` inside the entry of ``(model, k)``)."""
    out = {}
    for raw_type, entries in doc.items():
        if raw_type.endswith("_unconsolidated") or not isinstance(entries, Mapping):
            continue
        t = canonical_gpu_type(raw_type)
        for key, val in entries.items():
            if not isinstance(val, Mapping):
                continue
            model, k = _parse_key(key, f"throughput file {source}: GPU type {raw_type!r}")
            for other, rr in val.items():
                if other == "null":
                    continue
                o_model, _ = _parse_key(other, f"throughput file {source}: pair in {key!r}")
                if (not isinstance(rr, (list, tuple)) or len(rr) != 2
                        or not all(isinstance(r, (int, float)) and math.isfinite(r) and r >= 0
                                   and not isinstance(r, bool) for r in rr)):
                    raise ConfigError(f"throughput file {source}: GPU type {raw_type!r}, job type "
                                      f"{key!r}, pair {other!r}: expected [rate, rate] >= 0, got {rr!r}")
                out[(t, model, k, o_model)] = (float(rr[0]), float(rr[1]))
    return out


@lru_cache(maxsize=len(BUILTIN_TABLES))
def _builtin_doc(name: str) -> dict:
    if name not in BUILTIN_TABLES:
        raise ConfigError(f"unknown built-in throughput table {name!r}; choose from "
                          f"{sorted(BUILTIN_TABLES)}")
    with resources.files("sim").joinpath("data", BUILTIN_TABLES[name]).open("r") as f:
        return json.load(f)


def _dense(points: Mapping[int, float], kmax: int) -> tuple[np.ndarray, int]:
    """Rates for k = 0..kmax from measured points; returns (array, largest measured k)."""
    ks = sorted(points)
    rs = [points[k] for k in ks]
    out = np.zeros(kmax + 1)
    for k in range(1, ks[-1] + 1):
        if k <= ks[0]:
            out[k] = rs[0] * k / ks[0]
            continue
        j = int(np.searchsorted(ks, k))
        if ks[j] == k:
            out[k] = rs[j]
            continue
        k0, k1, r0, r1 = ks[j - 1], ks[j], rs[j - 1], rs[j]
        out[k] = 0.0 if (r0 == 0.0 or r1 == 0.0) else r0 + (r1 - r0) * (k - k0) / (k1 - k0)
    return out, ks[-1]


@njit(cache=True)
def _placement_rates(E, KX, m, k, nn, mask, sp, efficiency, n_types):
    """Slowest-worker rate of each placement: min over the GPU types used of the table
    rate at k GPUs (consolidated or spread column), extrapolated linearly beyond the
    largest measured count, times the slowest server's speed factor."""
    out = np.empty(m.shape[0])
    for i in range(m.shape[0]):
        if k[i] <= 0:
            out[i] = 0.0
            continue
        c = 1 if nn[i] > 1 else 0
        best = np.inf
        for t in range(n_types):
            if (mask[i] >> t) & 1 == 0:
                continue
            kx = KX[m[i], t, c]
            base = E[m[i], t, c, min(k[i], kx)]
            if k[i] > kx:
                base = base + base * efficiency * (k[i] - kx) / kx
            best = min(best, base)
        out[i] = best * sp[i] if np.isfinite(best) else 0.0
    return out


def _check_reference_bandwidths(reference, source: str) -> tuple[float, float] | None:
    if reference is None:
        return None
    try:
        intra, inter = (float(b) for b in reference)
    except (TypeError, ValueError):
        raise ConfigError(f"throughput table {source}: reference_bandwidth_gbps must be None or "
                          f"(intra, inter) Gbit/s, got {reference!r}") from None
    if not (0 < intra < math.inf and 0 < inter < math.inf):
        raise ConfigError(f"throughput table {source}: reference bandwidths must be finite and > 0, "
                          f"got {reference!r}")
    return intra, inter


class ModelLookup:
    """Model names to indices and per-model restart delays, shared by the oracles.

    A subclass sets ``models`` (names), ``_model_index`` (name -> index), ``source``
    and ``_kind`` (a word for error messages), and defines ``restart_delay_s``.
    """

    models: tuple[str, ...]
    _model_index: dict
    source: str
    _kind = "throughput table"

    def model_index(self, model: str | int) -> int:
        if isinstance(model, (int, np.integer)):
            if not 0 <= model < len(self.models):
                raise ConfigError(f"model index {model} out of range 0..{len(self.models) - 1}")
            return int(model)
        try:
            return self._model_index[model]
        except KeyError:
            raise ConfigError(f"unknown model {model!r} in {self._kind} {self.source} "
                              f"(known: {', '.join(self.models)})") from None

    def restart_delays_array(self) -> np.ndarray:
        """float64 [n_models]: ``restart_delay_s`` of every model, for the engine."""
        return np.array([self.restart_delay_s(i) for i in range(len(self.models))])

    def _check_models(self, m: np.ndarray) -> None:
        if m.size and (m.min() < 0 or m.max() >= len(self.models)):
            bad = m[(m < 0) | (m >= len(self.models))][0]
            raise ConfigError(f"model index {bad} out of range 0..{len(self.models) - 1}")

    def _rate_args(self, model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types):
        """The arguments of ``rates`` broadcast, flattened (contiguous) and checked:
        (shape, models, GPUs, nodes, type masks, speeds, number of cluster types)."""
        m, k, nn, mask, sp = np.broadcast_arrays(
            np.asarray(model_idx, dtype=np.int64), np.asarray(ngpu, dtype=np.int64),
            np.asarray(n_nodes, dtype=np.int64), np.asarray(type_mask, dtype=np.int64),
            np.asarray(min_speed, dtype=np.float64))
        shape = m.shape
        m, k, nn, mask, sp = (np.ascontiguousarray(a.ravel()) for a in (m, k, nn, mask, sp))
        self._check_models(m)
        nct = len(cluster_types)
        if nct < 63 and mask.size and (mask >> nct).any():
            raise ConfigError(f"type_mask has bits beyond the {nct} cluster GPU types")
        return shape, m, k, nn, mask, sp, nct


class TableThroughput(ModelLookup):
    """Table-driven oracle over Gavel-style measurements; implements :class:`ThroughputOracle`.

    Args:
        measurements: ``{gpu_type: {model: {gpu_count: iterations_per_s}}}``; a type named
            ``"<t>_unconsolidated"`` holds the spread measurements of type ``t``.
        reference_type: the type durations refer to (default ``"v100"``, else the first type).
        spread_penalty, scaling_efficiency, relative_speed: see the module docstring.
        restart_delays: model (or family) -> seconds; default Sia's :data:`RESTART_DELAY_S`.
        reference_bandwidth_gbps: (intra, inter) Gbit/s of the network the rates hold; the engine
            replaces that communication by the one at the cluster's bandwidths (sim.network).
            Default: the cluster defaults.  None: the rates do not depend on bandwidths.
        source: a label for error messages.
    """

    def __init__(self, measurements: Mapping[str, Mapping[str, Mapping[int, float]]], *,
                 reference_type: str | None = None, spread_penalty: float = SPREAD_PENALTY,
                 scaling_efficiency: float = SCALING_EFFICIENCY,
                 relative_speed: Mapping[str, float] | None = None,
                 restart_delays: Mapping[str, float] | None = None,
                 default_restart_delay_s: float = DEFAULT_RESTART_DELAY_S,
                 pairs: Mapping[tuple[str, str, int, str], tuple[float, float]] | None = None,
                 reference_bandwidth_gbps: tuple[float, float] | None = (DEFAULT_INTRA_BW_GBPS,
                                                                         DEFAULT_INTER_BW_GBPS),
                 multi_server: str = "measured", source: str = "<memory>") -> None:
        self.source = source
        self.reference_bandwidth_gbps = _check_reference_bandwidths(reference_bandwidth_gbps, source)
        if multi_server not in MULTI_SERVER_RULES:
            raise ConfigError(f"multi_server must be one of {', '.join(MULTI_SERVER_RULES)}, "
                              f"got {multi_server!r}")
        self.multi_server = multi_server
        if not (0.0 < spread_penalty <= 1.0):
            raise ConfigError(f"spread_penalty must be in (0, 1], got {spread_penalty}")
        if not (0.0 <= scaling_efficiency <= 1.0):
            raise ConfigError(f"scaling_efficiency must be in [0, 1], got {scaling_efficiency}")
        self.spread_penalty = float(spread_penalty)
        self.scaling_efficiency = float(scaling_efficiency)
        rel = dict(RELATIVE_SPEED if relative_speed is None else relative_speed)
        self.relative_speed = {canonical_gpu_type(k): float(v) for k, v in rel.items()}
        for k, v in self.relative_speed.items():
            if not (v > 0 and math.isfinite(v)):
                raise ConfigError(f"relative speed of {k!r} must be > 0, got {v}")
        self.restart_delays = dict(RESTART_DELAY_S if restart_delays is None else restart_delays)
        self.default_restart_delay_s = float(default_restart_delay_s)

        cons = {t: v for t, v in measurements.items() if not t.endswith("_unconsolidated")}
        unc = {t[: -len("_unconsolidated")]: v for t, v in measurements.items()
               if t.endswith("_unconsolidated")}
        if not cons:
            raise ConfigError(f"throughput table {source}: no consolidated GPU type")
        self.gpu_types: tuple[str, ...] = tuple(cons)
        if reference_type is None:
            reference_type = REFERENCE_TYPE if REFERENCE_TYPE in cons else self.gpu_types[0]
        reference_type = canonical_gpu_type(reference_type)
        if reference_type not in cons:
            raise ConfigError(f"throughput table {source}: reference type {reference_type!r} not in the "
                              f"table ({', '.join(self.gpu_types)})")
        self.reference_type = reference_type
        models = sorted({m for tab in cons.values() for m in tab} | {m for tab in unc.values() for m in tab})
        missing_ref = [m for m in models if not cons[reference_type].get(m)]
        if missing_ref:
            raise ConfigError(f"throughput table {source}: model {missing_ref[0]!r} has no measurement on "
                              f"the reference type {reference_type!r}")
        self.models: tuple[str, ...] = tuple(models)
        self._model_index = {m: i for i, m in enumerate(models)}
        kd = max(k for tab in measurements.values() for pts in tab.values() for k in pts)
        self._kd = kd
        M, T = len(models), len(self.gpu_types)
        D = np.zeros((M, T, 2, kd + 1))
        KX = np.ones((M, T, 2), dtype=np.int64)
        ref = self.gpu_types.index(reference_type)
        self.has_unconsolidated = tuple(t in unc for t in self.gpu_types)
        for mi, m in enumerate(models):
            D[mi, ref, 0], KX[mi, ref, 0] = _dense(cons[reference_type][m], kd)
        for ti, t in enumerate(self.gpu_types):
            for mi, m in enumerate(models):
                if ti != ref:
                    pts = cons[t].get(m)
                    if pts:
                        D[mi, ti, 0], KX[mi, ti, 0] = _dense(pts, kd)
                    elif t in self.relative_speed and reference_type in self.relative_speed:
                        f = self.relative_speed[t] / self.relative_speed[reference_type]
                        D[mi, ti, 0], KX[mi, ti, 0] = D[mi, ref, 0] * f, KX[mi, ref, 0]
                    else:
                        raise ConfigError(f"throughput table {source}: model {m!r} is not measured on "
                                          f"{t!r} and {t!r} has no relative speed")
                upts = unc.get(t, {}).get(m) if multi_server == "measured" else None
                if multi_server == "gavel":
                    D[mi, ti, 1], KX[mi, ti, 1] = D[mi, ti, 0], KX[mi, ti, 0]
                elif upts:
                    D[mi, ti, 1], KX[mi, ti, 1] = _dense(upts, kd)
                else:
                    D[mi, ti, 1], KX[mi, ti, 1] = D[mi, ti, 0] * self.spread_penalty, KX[mi, ti, 0]
        self._D, self._KX = D, KX
        self._measured = tuple(tuple(sorted(cons[reference_type][m])) for m in models)
        self._ext_cache: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._pairs = self._pair_array(pairs or {})

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_gavel_json(cls, path, **kwargs) -> "TableThroughput":
        """Read Gavel's ``simulation_throughputs.json`` format (or our wrapped built-in format)."""
        path = Path(path)
        text = read_text_file(path, "throughput file")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"throughput file {path}: invalid JSON: {exc}") from None
        return cls._from_doc(doc, str(path), **kwargs)

    @classmethod
    def _from_doc(cls, doc, source: str, **kwargs) -> "TableThroughput":
        if isinstance(doc, Mapping) and "throughputs" in doc and "format" in doc:
            kwargs.setdefault("reference_type", doc.get("reference_type"))
            doc = doc["throughputs"]
        measurements = _parse_gavel(doc, source)
        kwargs.setdefault("pairs", _parse_pairs(doc, source))
        return cls(measurements, source=source, **kwargs)

    @classmethod
    def builtin(cls, table: str = "gavel", **kwargs) -> "TableThroughput":
        """A built-in table (:data:`BUILTIN_TABLES`): Gavel's whole table (default) or the
        8-model excerpt of earlier versions (``table="excerpt"``)."""
        doc = _builtin_doc(table)
        return cls._from_doc(doc, f"<builtin: sim/data/{BUILTIN_TABLES[table]}>", **kwargs)

    # ----------------------------------------------------------------- model lookup

    def supported_counts(self, model) -> tuple[int, ...]:
        """GPU counts measured on the reference type, consolidated."""
        return self._measured[self.model_index(model)]

    def is_distributed(self, model) -> bool:
        """True if the model was measured at more than one GPU."""
        return self.supported_counts(model)[-1] > 1

    def restart_delay_s(self, model) -> float:
        """Restart/checkpoint delay of a model (Sia's measurements, default 30 s)."""
        name = self.models[self.model_index(model)]
        return restart_delay_s(name, self.restart_delays, self.default_restart_delay_s)


    # ----------------------------------------------------------------- rates
    def _columns(self, cluster_types: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        key = tuple(cluster_types)
        hit = self._ext_cache.get(key)
        if hit is not None:
            return hit
        M = len(self.models)
        E = np.zeros((M, len(key), 2, self._kd + 1))
        KX = np.ones((M, len(key), 2), dtype=np.int64)
        ref = self.gpu_types.index(self.reference_type)
        for ci, name in enumerate(key):
            t = canonical_gpu_type(name)
            if t in self.gpu_types:
                ti = self.gpu_types.index(t)
                E[:, ci], KX[:, ci] = self._D[:, ti], self._KX[:, ti]
            elif t in self.relative_speed and self.reference_type in self.relative_speed:
                f = self.relative_speed[t] / self.relative_speed[self.reference_type]
                E[:, ci], KX[:, ci] = self._D[:, ref] * f, self._KX[:, ref]
            else:
                raise ConfigError(f"GPU type {name!r} is neither in throughput table {self.source} "
                                  f"({', '.join(self.gpu_types)}) nor in the relative-speed table "
                                  f"({', '.join(sorted(self.relative_speed))})")
        self._ext_cache[key] = (E, KX)
        return E, KX

    def _lookup(self, E, KX, m, t, c, k) -> np.ndarray:
        kx = KX[m, t, c]
        kc = np.minimum(k, kx)
        base = E[m, t, c, kc]
        over = k > kx
        if over.any():
            base = base + np.where(over, base * self.scaling_efficiency * (k - kx) / kx, 0.0)
        return base

    def rates(self, model_idx, ngpu, n_nodes, type_mask, min_speed,
              cluster_types: tuple[str, ...]) -> np.ndarray:
        """Iterations/s of each job's whole placement (Numba kernel; see rates_numpy)."""
        args = (model_idx, ngpu, n_nodes, type_mask, min_speed)
        if all(isinstance(a, np.ndarray) and a.ndim == 1 for a in args) and \
                len({a.shape[0] for a in args}) == 1:          # the engine's hot path
            m, k, nn, mask = (a.astype(np.int64, copy=False) for a in args[:4])
            return self._rates_1d(m, k, nn, mask, min_speed.astype(np.float64, copy=False),
                                  cluster_types)
        shape, m, k, nn, mask, sp, nct = self._rate_args(model_idx, ngpu, n_nodes, type_mask,
                                                         min_speed, cluster_types)
        E, KX = self._columns(tuple(cluster_types))
        out = _placement_rates(E, KX, m, k, nn, mask, sp, float(self.scaling_efficiency), nct)
        return out.reshape(shape)

    def _rates_1d(self, m, k, nn, mask, sp, cluster_types) -> np.ndarray:
        if m.size and (m.min() < 0 or m.max() >= len(self.models)):
            self._check_models(m)
        nct = len(cluster_types)
        if nct < 63 and m.size and (mask >> nct).any():
            raise ConfigError(f"type_mask has bits beyond the {nct} cluster GPU types")
        E, KX = self._columns(tuple(cluster_types))
        return _placement_rates(E, KX, m, k, nn, mask, sp, float(self.scaling_efficiency), nct)

    def rates_numpy(self, model_idx, ngpu, n_nodes, type_mask, min_speed,
                    cluster_types: tuple[str, ...]) -> np.ndarray:
        """Plain numpy formulation of :meth:`rates` (its reference in the tests)."""
        shape, m, k, nn, mask, sp, nct = self._rate_args(model_idx, ngpu, n_nodes, type_mask,
                                                         min_speed, cluster_types)
        E, KX = self._columns(tuple(cluster_types))
        c = (nn > 1).astype(np.intp)
        kk = np.maximum(k, 1)
        out = np.full(m.shape, np.inf)
        for t in range(nct):
            used = ((mask >> t) & 1).astype(bool)
            if not used.any():
                continue
            if used.all():
                out = np.minimum(out, self._lookup(E, KX, m, t, c, kk))
            else:
                idx = np.flatnonzero(used)
                out[idx] = np.minimum(out[idx], self._lookup(E, KX, m[idx], t, c[idx], kk[idx]))
        out[~np.isfinite(out) | (k <= 0)] = 0.0
        return (out * sp).reshape(shape)

    def type_rates(self, model_idx, ngpu, cluster_types: tuple[str, ...], *,
                   spread: bool = False) -> np.ndarray:
        """float64 [n_jobs, n_cluster_types]: each job's rate on each type alone (speed 1)."""
        m, k = np.broadcast_arrays(np.asarray(model_idx, dtype=np.intp), np.asarray(ngpu, dtype=np.int64))
        m, k = m.ravel(), k.ravel()
        self._check_models(m)
        E, KX = self._columns(tuple(cluster_types))
        c = np.full(m.shape, int(spread), dtype=np.intp)
        out = np.empty((m.size, len(cluster_types)))
        for t in range(len(cluster_types)):
            out[:, t] = self._lookup(E, KX, m, t, c, np.maximum(k, 1))
        out[k <= 0] = 0.0
        return out

    def reference_rate(self, model_idx, ngpu) -> np.ndarray:
        m, k = np.broadcast_arrays(np.asarray(model_idx, dtype=np.intp), np.asarray(ngpu, dtype=np.int64))
        shape = m.shape
        m, k = m.ravel(), k.ravel()
        self._check_models(m)
        ref = self.gpu_types.index(self.reference_type)
        out = self._lookup(self._D, self._KX, m, ref, np.zeros(m.shape, np.intp), np.maximum(k, 1))
        out[k <= 0] = 0.0
        return out.reshape(shape)

    # ----------------------------------------------------------------- co-location pairs
    def _pair_array(self, pairs) -> np.ndarray:
        """float64 [M, M, T, kd + 1, 2]: measured pair rates by (model, other, type, k), NaN
        where not measured (pairs of models or types the table lacks are dropped)."""
        P = np.full((len(self.models), len(self.models), len(self.gpu_types), self._kd + 1, 2), np.nan)
        for (t, a, k, b), rr in pairs.items():
            if t in self.gpu_types and a in self._model_index and b in self._model_index and k <= self._kd:
                P[self._model_index[a], self._model_index[b], self.gpu_types.index(t), k] = rr
        return P

    @property
    def has_pairs(self) -> bool:
        return bool(np.isfinite(self._pairs).any())

    def pair_rates(self, model_a, model_b, ngpu, cluster_types: tuple[str, ...]) -> np.ndarray:
        """float64 [n, n_cluster_types, 2]: iterations/s of job a and job b when they share the
        same ``ngpu`` GPUs of each type (Gavel's measured co-location), NaN where the table has no
        such measurement (types it lacks included: no relative-speed guess for pairs)."""
        a, b, k = np.broadcast_arrays(np.asarray(model_a, np.intp), np.asarray(model_b, np.intp),
                                      np.asarray(ngpu, np.int64))
        a, b, k = a.ravel(), b.ravel(), k.ravel()
        self._check_models(a)
        self._check_models(b)
        out = np.full((a.size, len(cluster_types), 2), np.nan)
        ok = (k >= 1) & (k <= self._kd)
        for ci, name in enumerate(cluster_types):
            t = canonical_gpu_type(name)
            if t in self.gpu_types:
                ti = self.gpu_types.index(t)
                out[ok, ci] = self._pairs[a[ok], b[ok], ti, k[ok]]
        return out

    def iterations_for_duration(self, model_idx, ngpu, duration_s) -> np.ndarray:
        """Iterations a job of ``duration_s`` on the reference type (consolidated) performs."""
        return np.asarray(duration_s, dtype=np.float64) * self.reference_rate(model_idx, ngpu)

    def __repr__(self) -> str:
        rule = "" if self.multi_server == "measured" else f", multi_server {self.multi_server}"
        return (f"TableThroughput({len(self.models)} models, types {', '.join(self.gpu_types)}, "
                f"reference {self.reference_type}{rule}, source {self.source})")


@lru_cache(maxsize=1)
def default_oracle() -> TableThroughput:
    """The default oracle, :meth:`TableThroughput.builtin`, built once (it is never modified)."""
    return TableThroughput.builtin()
