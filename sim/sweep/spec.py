"""Sweep specs: a TOML file describing a grid of simulations, parsed into cells.

A spec (full reference in scalability/specs/README.md)::

    name = "smoke"                       # identifies the sweep in its output folder
    description = "..."                  # optional
    exclude_policies = []                # optional, with policy = "all"

    [grid]                               # every entry is an axis; cells = the cartesian product
    policy = "all"                       # or ["fifo", "sjf"]; "all" = every registered policy
    nodes = [64, 128]                    # uniform clusters (see [cluster]) ...
    # cluster = ["gavel-108", "uniform:nodes=16,gpus=4"]   # ... or presets / uniform: / TOML files
    load = [0.5, 0.8]
    seed = [0, 1]
    # jobs = [200, 400]                  # or workload.jobs / workload.jobs_per_node
    # trace = ["jobs.parquet"]           # replay traces (any format sim.traces reads) instead

    [cluster]                            # only with grid.nodes
    gpus_per_node = 8
    gpu_type = "v100"

    [workload]
    jobs_per_node = 2                    # or jobs = N
    # trace_format = "philly"            # format of the traces (default: detected per file)
    load_unit = "utilization"            # "jobs_per_hour" | "jobs_per_hour_per_node" | "utilization"
    sizes = "gavel"                      # "gavel" | "philly" | "single" | "hops"
    durations = "gavel"                  # "gavel" | "philly" | "hops"

    [engine]
    placement = "consolidated"           # default placement of every policy
    # round_s = 60.0                     # override every policy's round period
    # restart_delay_s = 10.0

    [policy.fifo]                        # fixed parameters of one policy
    placement = "spread"
    [policy.fifo.grid]                   # parameters that are axes of that policy only
    backfill = [false, true]

The spec's fingerprint (what makes an output folder "another sweep's") covers everything but the
description and which registered policies ``policy = "all"`` takes in.

Everything is checked here, before any cell runs: unknown tables or keys, unknown policies,
presets and policy parameters (each policy is built once with its parameters), empty axes,
unreadable traces.  Problems are :class:`~sim.errors.ConfigError` naming the spec file and key.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, SimError
from ..fsio import read_text_file
from ..limits import check_round
from ..workload import SIZES

__all__ = ["Cell", "SweepSpec", "load_spec", "parse_spec", "LOAD_UNITS", "cell_id"]

SPEC_FORMAT = "clustersim.sweep/1"

#: load units for generated workloads (``scale`` is the only unit for traces)
LOAD_UNITS = ("jobs_per_hour", "jobs_per_hour_per_node", "utilization")
TRACE_LOAD_UNITS = ("scale",)

_TOP_KEYS = {"name", "description", "exclude_policies", "grid", "cluster", "workload", "engine",
             "policy"}
_GRID_KEYS = {"policy", "cluster", "nodes", "load", "seed", "jobs", "trace"}
_CLUSTER_KEYS = {"gpus_per_node", "gpu_type"}
_WORKLOAD_KEYS = {"trace", "trace_format", "jobs", "jobs_per_node", "load_unit", "sizes", "durations"}
_ENGINE_KEYS = {"placement", "round_s", "restart_delay_s"}
_DURATIONS = ("gavel", "philly", "hops")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Cell:
    """One simulation of a sweep.

    ``params`` is the cell's identity (JSON-able; the id is its hash) and holds everything its
    result depends on.  ``paths`` maps path-valued parameters (``trace``, ``cluster`` files) to
    absolute paths for running; it is not part of the identity.
    """

    id: str
    params: dict
    label: str
    paths: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SweepSpec:
    name: str
    description: str
    source: str
    normalized: dict            # the spec with defaults filled; what the fingerprint hashes
    fingerprint: str
    cells: tuple[Cell, ...]
    policies: tuple[str, ...]   # the policies of the grid, "all" expanded

    def __len__(self) -> int:
        return len(self.cells)


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def cell_id(params: dict) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of ``params``."""
    return hashlib.sha256(_canonical(params).encode()).hexdigest()[:16]


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_spec(path) -> SweepSpec:
    """Read and validate a TOML sweep spec; relative paths in it are relative to its folder."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"sweep spec {path} does not exist")
    text = read_text_file(path, "sweep spec")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"sweep spec {path}: not valid TOML: {exc}") from None
    return parse_spec(doc, source=str(path), base_dir=path.resolve().parent)


class _Ctx:
    def __init__(self, source: str):
        self.source = source

    def err(self, where: str, msg: str) -> ConfigError:
        return ConfigError(f"sweep spec {self.source}: {where}: {msg}")

    def table(self, doc: dict, key: str, allowed: set[str]) -> dict:
        t = doc.get(key, {})
        if not isinstance(t, dict):
            raise self.err(f"[{key}]", f"must be a table, got {type(t).__name__}")
        self.keys(t, allowed, f"[{key}]")
        return t

    def keys(self, t: dict, allowed: set[str], where: str) -> None:
        unknown = sorted(set(t) - allowed)
        if unknown:
            raise self.err(where, f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")

    def axis(self, grid: dict, key: str, kind, check=None) -> list | None:
        """A grid axis: a non-empty list (a scalar counts as one value) of ``kind`` values."""
        if key not in grid:
            return None
        vals = grid[key]
        if not isinstance(vals, list):
            vals = [vals]
        if not vals:
            raise self.err(f"grid.{key}", "empty grid: this axis has no values")
        out = []
        for v in vals:
            out.append(self.value(f"grid.{key}", v, kind, check))
        if len(set(map(_canonical, out))) != len(out):
            raise self.err(f"grid.{key}", f"repeated values in {vals}")
        return out

    def value(self, where: str, v, kind, check=None):
        if kind is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise self.err(where, f"{v!r} is not a finite number")
            v = float(v)
        elif kind is int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise self.err(where, f"{v!r} is not an integer")
        elif kind is str:
            if not isinstance(v, str) or not v.strip():
                raise self.err(where, f"{v!r} is not a non-empty string")
            v = v.strip()
        if check is not None:
            msg = check(v)
            if msg:
                raise self.err(where, f"{v!r}: {msg}")
        return v


def _positive(v):
    return None if v > 0 else "must be > 0"


def _nonneg(v):
    return None if v >= 0 else "must be >= 0"


def _policy_variants(ctx: _Ctx, name: str, table: dict, placement: str) -> list[tuple[dict, dict]]:
    """[(all params, the grid-varying ones)] of one policy; each variant is built once."""
    from ..policies import get_policy

    if not isinstance(table, dict):
        raise ctx.err(f"[policy.{name}]", "must be a table of parameters")
    fixed = {k: v for k, v in table.items() if k != "grid"}
    grid = table.get("grid", {})
    if not isinstance(grid, dict):
        raise ctx.err(f"[policy.{name}.grid]", "must be a table of parameter lists")
    both = sorted(set(fixed) & set(grid))
    if both:
        raise ctx.err(f"[policy.{name}]", f"parameter {both[0]!r} is both fixed and in its grid")
    axes = []
    for k in sorted(grid):
        vals = grid[k]
        if not isinstance(vals, list):
            raise ctx.err(f"[policy.{name}.grid].{k}", "must be a list of values")
        if not vals:
            raise ctx.err(f"[policy.{name}.grid].{k}", "empty grid: this axis has no values")
        axes.append((k, vals))
    variants = []
    for combo in itertools.product(*(vals for _, vals in axes)):
        varying = dict(zip((k for k, _ in axes), combo))
        params = {"placement": placement, **fixed, **varying}
        try:
            _canonical(params)
        except (TypeError, ValueError):
            raise ctx.err(f"[policy.{name}]", f"parameters {params} are not plain TOML values") from None
        try:
            get_policy(name, **params)
        except ConfigError as exc:
            raise ctx.err(f"[policy.{name}]", str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise ctx.err(f"[policy.{name}]", f"bad parameters {params}: {exc}") from None
        variants.append((dict(sorted(params.items())), varying))
    return variants


def _cluster_source(ctx: _Ctx, spec: str, base_dir: Path | None) -> tuple[str, Path | None]:
    """A cluster string, and the absolute path when it names a TOML file."""
    from ..presets import PRESETS

    if spec in PRESETS or spec.startswith("uniform:"):
        return spec, None
    p = Path(spec)
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    if p.suffix == ".toml" or p.exists():
        if not p.is_file():
            raise ctx.err("grid.cluster", f"cluster file {spec!r} does not exist ({p})")
        return spec, p.resolve()
    raise ctx.err("grid.cluster", f"unknown cluster {spec!r}: not a preset ({', '.join(PRESETS)}), "
                  f"not uniform:nodes=N,gpus=G[,type=T], and not a TOML file")


def parse_spec(doc: dict, source: str = "<spec>", base_dir: Path | None = None) -> SweepSpec:
    """Validate a parsed TOML document and expand it into cells (see the module docstring)."""
    from ..presets import load_cluster
    from ..placement import PLACEMENT_MODES
    from ..policies import list_policies

    ctx = _Ctx(source)
    if not isinstance(doc, dict):
        raise ctx.err("top level", "must be a table")
    ctx.keys(doc, _TOP_KEYS, "top level")
    name = doc.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ctx.err("name", f"required: a name of letters, digits, '.', '_' or '-', got {name!r}")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise ctx.err("description", "must be a string")

    grid = ctx.table(doc, "grid", _GRID_KEYS)
    if not grid:
        raise ctx.err("[grid]", "empty grid: give at least policy, nodes or cluster, and load")
    ctab = ctx.table(doc, "cluster", _CLUSTER_KEYS)
    wtab = ctx.table(doc, "workload", _WORKLOAD_KEYS)
    etab = ctx.table(doc, "engine", _ENGINE_KEYS)
    ptab = doc.get("policy", {})
    if not isinstance(ptab, dict):
        raise ctx.err("[policy]", "must be a table of [policy.NAME] tables")

    # -- engine -----------------------------------------------------------------------------
    placement = ctx.value("engine.placement", etab.get("placement", "consolidated"), str,
                          lambda v: None if v in PLACEMENT_MODES else
                          f"unknown placement (choose from {', '.join(sorted(PLACEMENT_MODES))})")
    round_s = etab.get("round_s")
    if round_s is not None:
        round_s = ctx.value("engine.round_s", round_s, float)
        try:
            round_s = check_round(round_s, "engine.round_s")
        except ConfigError as exc:
            raise ctx.err("[engine]", str(exc)) from None
    restart = etab.get("restart_delay_s")
    if restart is not None:
        restart = ctx.value("engine.restart_delay_s", restart, float, _nonneg)

    # -- policies ---------------------------------------------------------------------------
    known = list_policies()
    pol = grid.get("policy", "all")
    exclude = doc.get("exclude_policies", [])
    if not isinstance(exclude, list) or not all(isinstance(x, str) for x in exclude):
        raise ctx.err("exclude_policies", "must be a list of policy names")
    for x in exclude:
        if x not in known:
            raise ctx.err("exclude_policies", f"unknown policy {x!r} (known: {', '.join(known)})")
    if pol == "all":
        policies = [p for p in known if p not in exclude]
        if not policies:
            raise ctx.err("grid.policy", "empty grid: every policy is excluded")
    else:
        if exclude:
            raise ctx.err("exclude_policies", 'only applies with grid.policy = "all"')
        policies = ctx.axis(grid, "policy", str)
        for p in policies:
            if p not in known:
                raise ctx.err("grid.policy", f"unknown policy {p!r} (known: {', '.join(known)})")
    for p in ptab:
        if p not in known:
            raise ctx.err(f"[policy.{p}]", f"unknown policy {p!r} (known: {', '.join(known)})")
        if p not in policies:
            raise ctx.err(f"[policy.{p}]", "parameters for a policy that is not in the grid")
    variants = {p: _policy_variants(ctx, p, ptab.get(p, {}), placement) for p in policies}

    # -- clusters ---------------------------------------------------------------------------
    clusters = ctx.axis(grid, "cluster", str)
    nodes = ctx.axis(grid, "nodes", int, _positive)
    if ctab and nodes is None:
        raise ctx.err("[cluster]", "only applies with grid.nodes")
    if clusters is not None and nodes is not None:
        raise ctx.err("grid", "give either nodes or cluster, not both")
    if clusters is None and nodes is None:
        raise ctx.err("grid", "empty grid: give nodes = [...] or cluster = [...]")
    if nodes is not None:
        gpn = ctx.value("cluster.gpus_per_node", ctab.get("gpus_per_node", 8), int, _positive)
        gtype = ctx.value("cluster.gpu_type", ctab.get("gpu_type", "v100"), str)
        clusters = [f"uniform:nodes={n},gpus={gpn},type={gtype}" for n in nodes]
    cluster_info: dict[str, tuple[int, int, Path | None, str | None]] = {}
    for c in clusters:
        cs, path = _cluster_source(ctx, c, base_dir)
        try:
            cl = load_cluster(path if path is not None else cs)
            _check_gpu_types(cl)
        except SimError as exc:
            raise ctx.err("grid.cluster" if nodes is None else "[cluster]", str(exc)) from None
        cluster_info[c] = (cl.n_nodes, cl.total_gpus, path,
                           _sha256_file(path) if path is not None else None)

    # -- workload ---------------------------------------------------------------------------
    traces = ctx.axis(grid, "trace", str)
    if "trace" in wtab:
        if traces is not None:
            raise ctx.err("workload.trace", "give the trace in [workload] or grid.trace, not both")
        traces = [ctx.value("workload.trace", wtab["trace"], str)]
    generate = traces is None
    loads = ctx.axis(grid, "load", float, _positive)
    unit = ctx.value("workload.load_unit", wtab.get("load_unit",
                                                     "jobs_per_hour" if generate else "scale"), str)
    if generate and unit not in LOAD_UNITS:
        raise ctx.err("workload.load_unit", f"{unit!r}: choose from {', '.join(LOAD_UNITS)}")
    if not generate and unit not in TRACE_LOAD_UNITS:
        raise ctx.err("workload.load_unit", f"{unit!r}: a trace's load is a 'scale' of its "
                      f"arrival rate")
    if generate and loads is None:
        raise ctx.err("grid.load", "empty grid: generated workloads need load = [...]")
    sizes = ctx.value("workload.sizes", wtab.get("sizes", "gavel"), str,
                      lambda v: None if v in SIZES else f"choose from {', '.join(SIZES)}")
    durations = ctx.value("workload.durations", wtab.get("durations", "gavel"), str,
                          lambda v: None if v in _DURATIONS else f"choose from {', '.join(_DURATIONS)}")
    if not generate and ("sizes" in wtab or "durations" in wtab):
        raise ctx.err("[workload]", "sizes and durations apply to generated workloads, not traces")
    jobs_axis = ctx.axis(grid, "jobs", int, _positive)
    jobs_fixed = wtab.get("jobs")
    per_node = wtab.get("jobs_per_node")
    given = [k for k, v in (("grid.jobs", jobs_axis), ("workload.jobs", jobs_fixed),
                            ("workload.jobs_per_node", per_node)) if v is not None]
    if len(given) > 1:
        raise ctx.err(given[1], "give only one of grid.jobs, workload.jobs, workload.jobs_per_node")
    if jobs_fixed is not None:
        jobs_axis = [ctx.value("workload.jobs", jobs_fixed, int, _positive)]
    if per_node is not None:
        per_node = ctx.value("workload.jobs_per_node", per_node, float, _positive)
    if generate and not given:
        raise ctx.err("[workload]", "the number of jobs is missing: give jobs, jobs_per_node "
                      "or grid.jobs")
    trace_format = _trace_format(ctx, wtab, generate)
    trace_info = {}
    for t in traces or []:
        p = Path(t)
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        if not p.is_file():
            raise ctx.err("workload.trace", f"trace {t!r} does not exist ({p})")
        from ..traces import read_trace
        read_trace(p, trace_format)      # a TraceError names file, row and field
        trace_info[t] = (p.resolve(), _sha256_file(p))
    seeds = ctx.axis(grid, "seed", int, _nonneg) or [0]

    normalized = {
        "format": SPEC_FORMAT, "name": name,
        "grid": {"policy": pol if pol == "all" else policies, "cluster": clusters,
                 "load": loads, "seed": seeds, "jobs": jobs_axis,
                 "trace": [{"trace": t, "sha256": trace_info[t][1]} for t in traces] if traces else None},
        "exclude_policies": sorted(exclude),
        "cluster_files": {c: v[3] for c, v in cluster_info.items() if v[3]},
        "workload": {"load_unit": unit, "sizes": sizes if generate else None,
                     "durations": durations if generate else None, "jobs_per_node": per_node},
        "engine": {"placement": placement, "round_s": round_s, "restart_delay_s": restart},
        "policy": {p: ptab[p] for p in sorted(ptab)},
    }
    if trace_format is not None:      # only when given: earlier sweeps keep their fingerprints
        normalized["workload"]["trace_format"] = trace_format
    # which registered policies "all" covers is not part of the sweep's identity: policies
    # that register later, or leave exclude_policies, join the same output folder
    ident = {k: v for k, v in normalized.items() if k != "exclude_policies"}
    fingerprint = hashlib.sha256(_canonical(ident).encode()).hexdigest()[:16]

    cells = []
    for p in policies:
        for params, varying in variants[p]:
            plabel = p + ("[" + ",".join(f"{k}={v}" for k, v in varying.items()) + "]" if varying else "")
            for c in clusters:
                n_nodes, total_gpus, cpath, csha = cluster_info[c]
                for tr in traces or [None]:
                    for jobs in (jobs_axis or [None]):
                        if per_node is not None:
                            jobs = max(1, int(round(per_node * n_nodes)))
                        for load in (loads or [None]):
                            for seed in seeds:
                                cp = {
                                    "policy": p, "policy_label": plabel, "policy_params": params,
                                    "cluster": c, "cluster_sha256": csha,
                                    "nodes": n_nodes, "total_gpus": total_gpus,
                                    "workload": "trace" if tr else "generate",
                                    "trace": tr, "trace_sha256": trace_info[tr][1] if tr else None,
                                    "jobs": jobs, "load": load, "load_unit": unit,
                                    "sizes": sizes if generate else None,
                                    "durations": durations if generate else None,
                                    "seed": seed, "round_s": round_s, "restart_delay_s": restart,
                                }
                                if trace_format is not None:
                                    cp["trace_format"] = trace_format
                                paths = {}
                                if cpath is not None:
                                    paths["cluster"] = str(cpath)
                                if tr:
                                    paths["trace"] = str(trace_info[tr][0])
                                label = (f"{plabel} {_short_cluster(c, n_nodes)} "
                                         + (f"trace={Path(tr).name} " if tr else "")
                                         + (f"jobs={jobs} " if jobs else "")
                                         + (f"load={load:g} " if load is not None else "")
                                         + f"seed={seed}")
                                cells.append(Cell(cell_id(cp), cp, label, paths))
    if not cells:
        raise ctx.err("grid", "empty grid: no cells")
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        raise ctx.err("grid", "two cells have the same parameters")
    return SweepSpec(name=name, description=description, source=source, normalized=normalized,
                     fingerprint=fingerprint, cells=tuple(cells), policies=tuple(policies))


def _trace_format(ctx, wtab: dict, generate: bool) -> str | None:
    """``workload.trace_format``: a job-trace format of sim.traces, for traces only."""
    if "trace_format" not in wtab:
        return None
    from ..traces import JOB_FORMATS
    if generate:
        raise ctx.err("workload.trace_format", "applies to traces (grid.trace or workload.trace)")
    return ctx.value("workload.trace_format", wtab["trace_format"], str,
                     lambda v: None if v in JOB_FORMATS else f"choose from {', '.join(JOB_FORMATS)}")


def _check_gpu_types(cluster) -> None:
    """Every GPU type of the cluster must be known to the built-in throughput oracle."""
    import numpy as np
    from ..throughput import default_oracle

    k = len(cluster.gpu_types)
    one = np.ones(k, np.int64)
    default_oracle().rates(np.zeros(k, np.int64), one, one, np.left_shift(1, np.arange(k, dtype=np.int64)),
                    np.ones(k), cluster.gpu_types)


def _short_cluster(c: str, n_nodes: int) -> str:
    return f"nodes={n_nodes}" if c.startswith("uniform:") else c
