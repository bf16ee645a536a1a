"""The cluster model: nodes with a GPU count, a GPU type, a per-server speed factor and bandwidths.

A :class:`Cluster` is immutable and stores one numpy array per node attribute, so the engine and
policies can use it without a Python loop per node.  Clusters come from

* a built-in preset name (``gavel-108``, ``sia-64``, ``hops-512``, ``hops-64``, ``philly``;
  see :mod:`sim.presets`, whose :func:`~sim.presets.load_cluster` resolves all three forms),
* the form ``uniform:nodes=N,gpus=G[,type=T][,speed=S][,intra=GBPS][,inter=GBPS]``, or
* a TOML file::

      name = "my-cluster"

      [[nodes]]
      count = 4              # how many identical servers (default 1)
      gpus = 8               # GPUs per server (> 0)
      type = "V100"          # GPU type; canonicalized to "v100"
      speed = 1.0            # optional per-server speed factor (> 0), default 1.0
      intra_bw_gbps = 128.0  # optional, default DEFAULT_INTRA_BW_GBPS
      inter_bw_gbps = 25.0   # optional, default DEFAULT_INTER_BW_GBPS
      name_prefix = "v100-"  # optional; nodes are then named v100-0, v100-1, ...

GPU type names are canonical lowercase strings without spaces, dashes or underscores
(``"RTX 2080 Ti"`` -> ``"rtx2080ti"``), see :func:`canonical_gpu_type`.

Bandwidths (Gbit/s, >= 0) set the ring all-reduce time of multi-GPU jobs over their slowest link,
relative to the bandwidths the throughput oracle's rates were measured at (:mod:`sim.network`,
docs/network.md); all nodes of one GPU type must then share them.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ConfigError
from .fsio import read_text_file
from .limits import clip

__all__ = [
    "Cluster",
    "parse_uniform",
    "cluster_from_toml",
    "cluster_to_toml",
    "uniform_cluster",
    "cluster_from_groups",
    "canonical_gpu_type",
    "DEFAULT_INTRA_BW_GBPS",
    "DEFAULT_INTER_BW_GBPS",
    "DEFAULT_UNIFORM_TYPE",
]

#: Default intra-node GPU-to-GPU bandwidth, Gbit/s.  Our choice [I]: PCIe 3.0 x16, about 16 GB/s.
DEFAULT_INTRA_BW_GBPS = 128.0
#: Default inter-node bandwidth, Gbit/s.  Our choice [I]: 25 Gb Ethernet, a common cloud NIC.
DEFAULT_INTER_BW_GBPS = 25.0
#: GPU type of ``uniform:`` clusters when ``type=`` is not given.  Our choice [I]: Gavel's
#: reference type, so generated durations map 1:1 onto run time.
DEFAULT_UNIFORM_TYPE = "v100"

_NODE_KEYS = {"count", "gpus", "type", "speed", "intra_bw_gbps", "inter_bw_gbps", "name_prefix"}


def canonical_gpu_type(name: str) -> str:
    """Lowercase, drop spaces, dashes and underscores: ``"RTX 2080-Ti"`` -> ``"rtx2080ti"``."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"GPU type must be a non-empty string, got {name!r}")
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


@dataclass(frozen=True, eq=False)
class Cluster:
    """A GPU cluster, one array entry per node (server).

    Attributes:
        name: a label for reports.
        gpu_types: the distinct GPU type names; a node's ``node_type`` indexes this tuple.
        node_gpus: int32 [n_nodes], GPUs per node (> 0).
        node_type: int32 [n_nodes], index into ``gpu_types``.
        node_speed: float64 [n_nodes], per-server speed factor (1.0 = nominal), the
            server-entity heterogeneity of Hops (algorithms.md §1.1, §4.3).
        intra_bw_gbps: float64 [n_nodes], GPU-to-GPU bandwidth inside the node.
        inter_bw_gbps: float64 [n_nodes], the node's network bandwidth.
        node_names: optional names, one per node.
    """

    name: str
    gpu_types: tuple[str, ...]
    node_gpus: np.ndarray
    node_type: np.ndarray
    node_speed: np.ndarray
    intra_bw_gbps: np.ndarray
    inter_bw_gbps: np.ndarray
    node_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        def arr(field: str, dtype) -> np.ndarray:
            a = np.ascontiguousarray(np.asarray(getattr(self, field)), dtype=dtype).reshape(-1)
            a.setflags(write=False)
            object.__setattr__(self, field, a)
            return a

        types = tuple(self.gpu_types)
        object.__setattr__(self, "gpu_types", types)
        if len(set(types)) != len(types):
            raise ConfigError(f"cluster {self.name!r}: duplicate GPU type names in {types}")
        gpus = arr("node_gpus", np.int32)
        ntype = arr("node_type", np.int32)
        speed = arr("node_speed", np.float64)
        intra = arr("intra_bw_gbps", np.float64)
        inter = arr("inter_bw_gbps", np.float64)
        n = gpus.shape[0]
        if n == 0:
            raise ConfigError(f"cluster {self.name!r} has no nodes")
        for field, a in (("node_type", ntype), ("node_speed", speed),
                         ("intra_bw_gbps", intra), ("inter_bw_gbps", inter)):
            if a.shape[0] != n:
                raise ConfigError(f"cluster {self.name!r}: {field} has {a.shape[0]} entries, "
                                  f"node_gpus has {n}")
        bad = np.flatnonzero(gpus <= 0)
        if bad.size:
            raise ConfigError(f"cluster {self.name!r}: node {bad[0]} has {gpus[bad[0]]} GPUs (must be > 0)")
        bad = np.flatnonzero((ntype < 0) | (ntype >= len(types)))
        if bad.size:
            raise ConfigError(f"cluster {self.name!r}: node {bad[0]} has GPU type id {ntype[bad[0]]}, "
                              f"not in 0..{len(types) - 1}")
        bad = np.flatnonzero(~(speed > 0) | ~np.isfinite(speed))
        if bad.size:
            raise ConfigError(f"cluster {self.name!r}: node {bad[0]} has speed {speed[bad[0]]} (must be > 0)")
        for field, a in (("intra_bw_gbps", intra), ("inter_bw_gbps", inter)):
            bad = np.flatnonzero(~(a >= 0) | ~np.isfinite(a))
            if bad.size:
                raise ConfigError(f"cluster {self.name!r}: node {bad[0]} has {field} {a[bad[0]]} (must be >= 0)")
        if self.node_names is not None:
            names = tuple(str(s) for s in self.node_names)
            if len(names) != n:
                raise ConfigError(f"cluster {self.name!r}: {len(names)} node names for {n} nodes")
            object.__setattr__(self, "node_names", names)

    @property
    def n_nodes(self) -> int:
        return int(self.node_gpus.shape[0])

    @property
    def total_gpus(self) -> int:
        return int(self.node_gpus.sum(dtype=np.int64))

    @property
    def n_types(self) -> int:
        return len(self.gpu_types)

    def gpus_by_type(self) -> dict[str, int]:
        """GPU type name -> number of GPUs of that type."""
        counts = self.gpus_per_type()
        return {t: int(counts[i]) for i, t in enumerate(self.gpu_types)}

    def gpus_per_type(self) -> np.ndarray:
        """int64 [n_types]: GPUs of each type id."""
        return np.bincount(self.node_type, weights=self.node_gpus,
                           minlength=len(self.gpu_types)).astype(np.int64)

    def type_id(self, name: str) -> int:
        """Type id of a GPU type name (canonicalized); ConfigError if the cluster lacks it."""
        key = canonical_gpu_type(name)
        try:
            return self.gpu_types.index(key)
        except ValueError:
            raise ConfigError(f"cluster {self.name!r} has no GPU type {key!r} "
                              f"(it has {', '.join(self.gpu_types)})") from None

    def node_name(self, i: int) -> str:
        return self.node_names[i] if self.node_names is not None else f"node{i}"

    def describe(self) -> str:
        """One line: name, nodes, GPUs, GPUs per type."""
        by_type = ", ".join(f"{t} {c}" for t, c in self.gpus_by_type().items())
        speeds = np.unique(self.node_speed)
        sp = "" if speeds.size == 1 and speeds[0] == 1.0 else \
            f"; speed factors {', '.join(f'{s:g}' for s in speeds)}"
        return f"{self.name}: {self.n_nodes} nodes, {self.total_gpus} GPUs ({by_type}){sp}"

    def __repr__(self) -> str:
        return f"Cluster({self.describe()})"


def cluster_from_groups(name: str, groups, *, source: str = "<groups>") -> Cluster:
    """Build a cluster from groups of identical nodes.

    ``groups`` is a sequence of dicts with the TOML ``[[nodes]]`` keys (``count``, ``gpus``,
    ``type``, optional ``speed``, ``intra_bw_gbps``, ``inter_bw_gbps``, ``name_prefix``).
    Errors name ``source`` and the 0-based node entry.
    """
    types: list[str] = []
    gpus, ntype, speed, intra, inter, names = [], [], [], [], [], []
    any_names = False
    for i, g in enumerate(groups):
        where = f"{source}: [[nodes]] entry {i}"
        if not isinstance(g, dict):
            raise ConfigError(f"{where}: must be a table, got {type(g).__name__}")
        unknown = set(g) - _NODE_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} "
                              f"(allowed: {', '.join(sorted(_NODE_KEYS))})")

        def num(key, default, kind, *, positive):
            v = g.get(key, default)
            if v is None:
                raise ConfigError(f"{where}: missing field {key!r}")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                    (kind is int and not float(v).is_integer()):
                raise ConfigError(f"{where}: field {key!r} must be a{'n integer' if kind is int else ' number'}, got {v!r}")
            v = kind(v)
            if not np.isfinite(v) or (v <= 0 if positive else v < 0):
                raise ConfigError(f"{where}: field {key!r} must be {'> 0' if positive else '>= 0'}, got {v!r}")
            return v

        count = num("count", 1, int, positive=True)
        ng = num("gpus", None, int, positive=True)
        if "type" not in g:
            raise ConfigError(f"{where}: missing field 'type'")
        try:
            t = canonical_gpu_type(g["type"])
        except ConfigError as exc:
            raise ConfigError(f"{where}: field 'type': {exc}") from None
        sp = num("speed", 1.0, float, positive=True)
        bi = num("intra_bw_gbps", DEFAULT_INTRA_BW_GBPS, float, positive=False)
        bo = num("inter_bw_gbps", DEFAULT_INTER_BW_GBPS, float, positive=False)
        prefix = g.get("name_prefix")
        if prefix is not None and not isinstance(prefix, str):
            raise ConfigError(f"{where}: field 'name_prefix' must be a string, got {prefix!r}")
        if t not in types:
            types.append(t)
        tid = types.index(t)
        gpus.append(np.full(count, ng, np.int32))
        ntype.append(np.full(count, tid, np.int32))
        speed.append(np.full(count, sp))
        intra.append(np.full(count, bi))
        inter.append(np.full(count, bo))
        if prefix is not None:
            any_names = True
        names.append((prefix, count))
    if not gpus:
        raise ConfigError(f"{source}: no [[nodes]] entries")
    node_names = None
    if any_names:
        node_names, k = [], 0
        for prefix, count in names:
            if prefix is None:
                node_names.extend(f"node{k + j}" for j in range(count))
            else:
                node_names.extend(f"{prefix}{j}" for j in range(count))
            k += count
        if len(set(node_names)) != len(node_names):
            raise ConfigError(f"{source}: node names are not unique (check name_prefix)")
    return Cluster(name=name, gpu_types=tuple(types), node_gpus=np.concatenate(gpus),
                   node_type=np.concatenate(ntype), node_speed=np.concatenate(speed),
                   intra_bw_gbps=np.concatenate(intra), inter_bw_gbps=np.concatenate(inter),
                   node_names=tuple(node_names) if node_names is not None else None)


def cluster_from_toml(path) -> Cluster:
    """Read a cluster TOML file (format in the module docstring)."""
    path = Path(path)
    src = str(path)
    text = read_text_file(path, "cluster file")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cluster file {src}: invalid TOML: {exc}") from None
    unknown = set(doc) - {"name", "nodes"}
    if unknown:
        raise ConfigError(f"cluster file {src}: unknown top-level field(s) {', '.join(sorted(unknown))}")
    name = doc.get("name", path.stem)
    if not isinstance(name, str):
        raise ConfigError(f"cluster file {src}: field 'name' must be a string")
    nodes = doc.get("nodes")
    if nodes is None:
        raise ConfigError(f"cluster file {src}: missing field 'nodes' (one [[nodes]] table per server group)")
    if not isinstance(nodes, list):
        raise ConfigError(f"cluster file {src}: field 'nodes' must be an array of tables ([[nodes]])")
    return cluster_from_groups(name, nodes, source=f"cluster file {src}")


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cluster_to_toml(cluster: Cluster) -> str:
    """Serialize a cluster to the TOML format; runs of identical nodes become one ``[[nodes]]``.

    Node names are kept only when they follow the ``<prefix><index>`` pattern per run; otherwise
    they are dropped (the file stays loadable).  A change of name prefix ends a run (server
    models that differ only by name, e.g. Hops' RTX 3090 servers, stay apart).
    """
    names = cluster.node_names or ("",) * cluster.n_nodes
    stem = [re.sub(r"\d+$", "", s) for s in names]
    lines = [f"name = {_toml_str(cluster.name)}", ""]
    n = cluster.n_nodes
    key = np.stack([cluster.node_gpus.astype(np.float64), cluster.node_type.astype(np.float64),
                    cluster.node_speed, cluster.intra_bw_gbps, cluster.inter_bw_gbps], axis=1)
    start = 0
    while start < n:
        end = start + 1
        while end < n and np.array_equal(key[end], key[start]) and stem[end] == stem[start]:
            end += 1
        prefix = None
        if cluster.node_names is not None:
            m = re.fullmatch(r"(.*?)(\d+)", cluster.node_names[start])
            if m and m.group(2) == "0" and all(
                    cluster.node_names[start + j] == f"{m.group(1)}{j}" for j in range(end - start)):
                prefix = m.group(1)
        lines += ["[[nodes]]", f"count = {end - start}", f"gpus = {int(cluster.node_gpus[start])}",
                  f"type = {_toml_str(cluster.gpu_types[cluster.node_type[start]])}",
                  f"speed = {float(cluster.node_speed[start])!r}",
                  f"intra_bw_gbps = {float(cluster.intra_bw_gbps[start])!r}",
                  f"inter_bw_gbps = {float(cluster.inter_bw_gbps[start])!r}"]
        if prefix is not None:
            lines.append(f"name_prefix = {_toml_str(prefix)}")
        lines.append("")
        start = end
    return "\n".join(lines)


def uniform_cluster(nodes: int, gpus: int, gpu_type: str = DEFAULT_UNIFORM_TYPE, *, speed: float = 1.0,
                    intra_bw_gbps: float = DEFAULT_INTRA_BW_GBPS,
                    inter_bw_gbps: float = DEFAULT_INTER_BW_GBPS, name: str | None = None) -> Cluster:
    """``nodes`` identical servers with ``gpus`` GPUs of ``gpu_type`` each."""
    t = canonical_gpu_type(gpu_type)
    return cluster_from_groups(
        name or f"uniform-{nodes}x{gpus}-{t}",
        [{"count": nodes, "gpus": gpus, "type": t, "speed": speed,
          "intra_bw_gbps": intra_bw_gbps, "inter_bw_gbps": inter_bw_gbps}],
        source="uniform cluster")


_UNIFORM_KEYS = {"nodes": int, "gpus": int, "type": str, "speed": float, "intra": float, "inter": float}


def parse_uniform(spec: str) -> Cluster:
    """A cluster from the form ``uniform:nodes=N,gpus=G[,type=T][,speed=S][,intra=GBPS][,inter=GBPS]``."""
    body = spec[len("uniform:"):]
    kv: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in body.split(","))):
        if "=" not in part:
            raise ConfigError(f"cluster spec {spec!r}: {part!r} is not key=value")
        k, v = (s.strip() for s in part.split("=", 1))
        if k in kv:
            raise ConfigError(f"cluster spec {clip(spec)!r}: key {k!r} is given twice")
        if k not in _UNIFORM_KEYS:
            raise ConfigError(f"cluster spec {clip(spec)!r}: unknown key {clip(k)!r} "
                              f"(allowed: {', '.join(_UNIFORM_KEYS)})")
        conv = _UNIFORM_KEYS[k]
        try:
            kv[k] = conv(v)
        except ValueError:
            raise ConfigError(f"cluster spec {spec!r}: {k}={v!r} is not a valid {conv.__name__}") from None
    for k in ("nodes", "gpus"):
        if k not in kv:
            raise ConfigError(f"cluster spec {spec!r}: missing {k}= (form: uniform:nodes=N,gpus=G[,type=T][,speed=S])")
        if kv[k] <= 0:
            raise ConfigError(f"cluster spec {spec!r}: {k} must be > 0")
    return uniform_cluster(kv["nodes"], kv["gpus"], kv.get("type", DEFAULT_UNIFORM_TYPE),
                           speed=kv.get("speed", 1.0),
                           intra_bw_gbps=kv.get("intra", DEFAULT_INTRA_BW_GBPS),
                           inter_bw_gbps=kv.get("inter", DEFAULT_INTER_BW_GBPS))
