"""Node lists of real clusters -> :class:`~sim.cluster.Cluster`.

=============== ===================================================================================
format          file
=============== ===================================================================================
openb-nodes     Alibaba openb ``openb_node_list_{all,gpu}_node.csv``: ``sn, cpu_milli, memory_mib,
                gpu, model`` (FGD, ATC'23; 1,523 nodes / 6,212 GPUs, 1,213 GPU nodes)
pai-machines    Alibaba PAI 2020 ``pai_machine_spec.csv``: ``machine, gpu_type, cap_cpu, cap_mem,
                cap_gpu`` (official file has no header; 1,897 machines, 1,814 with 6,742 GPUs)
spot-nodes      Alibaba 2026 spot-GPU ``node_info_df.csv``: ``gpu_model, gpu_capacity_num,
                cpu_num, node_name`` (GFS, ASPLOS'26; 4,278 nodes / 10,412 GPUs)
philly-machines the revised Philly machine list (Qinghao-Hu/Philly-Trace-Scripts
                ``revised_machine_list.csv``): ``<index>, machineId, number of GPUs`` (552 machines,
                3,205 GPUs; the official ``cluster_machine_list`` is wrong, msr-fiddle/philly-traces#8)
=============== ===================================================================================

A :class:`~sim.cluster.Cluster` node must have GPUs: CPU-only nodes are left out and counted in
the report (``CPU-only node``).  GPU type names go through a mapping table (below; pass
``gpu_type_map=`` to change it): names the table lacks are canonicalized
(:func:`~sim.cluster.canonical_gpu_type`) and noted.  Node names are kept; bandwidths are the
:mod:`sim.cluster` defaults (the node lists give none).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cluster import DEFAULT_INTER_BW_GBPS, DEFAULT_INTRA_BW_GBPS, Cluster, canonical_gpu_type
from ..errors import ConfigError, TraceError
from .common import RowCheck, TraceReport, _check_file, csv_batches, read_header, strings, to_number

__all__ = ["ClusterLoad", "read_openb_nodes", "read_pai_machines", "read_spot_nodes", "read_philly_machines",
           "OPENB_GPU_TYPES", "PAI_GPU_TYPES", "SPOT_GPU_TYPES", "PHILLY_MACHINE_GPU_TYPE", "map_gpu_type"]

#: openb ``model`` -> our GPU type.  G1/G2/G3 are undisclosed models (kept as g1/g2/g3: give
#: them relative speeds, or replay with uniform speeds).  V100M16 and V100M32 differ only in
#: memory: both map to "v100" (our choice; map them apart to keep the distinction).
OPENB_GPU_TYPES = {"G1": "g1", "G2": "g2", "G3": "g3", "P100": "p100", "T4": "t4", "V100M16": "v100",
                   "V100M32": "v100", "A10": "a10"}
#: PAI ``gpu_type`` -> our GPU type.  MISC = "GPUs of older generations, e.g. K40m, K80, M60"
#: (trace README): "k80" is our choice.  V100M32 -> "v100" (memory only).
PAI_GPU_TYPES = {"MISC": "k80", "P100": "p100", "T4": "t4", "V100": "v100", "V100M32": "v100"}
#: Spot 2026 ``gpu_model`` -> our GPU type; the two undisclosed series are kept as series1/2.
SPOT_GPU_TYPES = {"A10": "a10", "A100-SXM4-80GB": "a100", "A800-SXM4-80GB": "a800", "A800": "a800",
                  "H800": "h800", "GPU-series-1": "series1", "GPU-series-2": "series2"}
#: GPU type of the Philly machines (not in the list; = sim.presets.PHILLY_GPU_TYPE).
PHILLY_MACHINE_GPU_TYPE = "p100"


def map_gpu_type(raw: str, table: Mapping[str, str] | None) -> str:
    """``raw`` through ``table`` (exact, then case-insensitive), else canonicalized."""
    raw = str(raw).strip()
    if table:
        if raw in table:
            return canonical_gpu_type(table[raw])
        low = {k.lower(): v for k, v in table.items()}
        if raw.lower() in low:
            return canonical_gpu_type(low[raw.lower()])
    return canonical_gpu_type(raw)


@dataclass(eq=False)
class ClusterLoad:
    """A cluster read from a node list, with the report of what was left out."""

    cluster: Cluster
    report: TraceReport


def _build(name: str, report: TraceReport, names: list, gpus: np.ndarray, raw_types: list,
           table: Mapping[str, str] | None) -> ClusterLoad:
    if len(gpus) == 0:
        raise TraceError("no node with GPUs in the node list", file=report.source)
    uniq = list(dict.fromkeys(raw_types))
    mapped = {}
    for u in uniq:
        try:
            mapped[u] = map_gpu_type(u, table)
        except ConfigError as exc:
            raise TraceError(f"bad GPU type {u!r}: {exc}", file=report.source) from None
        if table is not None and u not in table and u.lower() not in {k.lower() for k in table}:
            report.note(f"GPU type {u!r} is not in the mapping table; used as {mapped[u]!r}")
    types = list(dict.fromkeys(mapped[u] for u in uniq))
    tid = np.array([types.index(mapped[t]) for t in raw_types], np.int32)
    n = len(gpus)
    cluster = Cluster(name=name, gpu_types=tuple(types), node_gpus=np.asarray(gpus, np.int32), node_type=tid,
                      node_speed=np.ones(n), intra_bw_gbps=np.full(n, DEFAULT_INTRA_BW_GBPS),
                      inter_bw_gbps=np.full(n, DEFAULT_INTER_BW_GBPS),
                      node_names=tuple(str(x) for x in names) if len(set(names)) == n else None)
    if cluster.node_names is None:
        report.note("node names are not unique: not kept")
    report.jobs = n
    return ClusterLoad(cluster, report)


def _read(path, fmt, fmt_name, name_col, gpu_col, type_col, required, column_names=None, skip_invalid=False,
          cpu_type_values=("", "CPU")):
    report = TraceReport(str(path), fmt, unit="GPU nodes")
    names, gpus, types = [], [], []
    for cols, rows, off in csv_batches(path, fmt_name=fmt_name, report=report, required=required,
                                       column_names=column_names, skip_invalid=skip_invalid):
        chk = RowCheck(report, rows, skip_invalid, off)
        g = to_number(cols[gpu_col], chk, gpu_col, integer=True, what="GPU count")
        chk.flag(np.isfinite(g) & (g < 0), "negative_gpus", gpu_col, lambda i: f"negative GPU count {g[i]:g}")
        nm = cols[name_col]
        chk.flag(nm.is_null().to_numpy(zero_copy_only=False), "missing_value", name_col, lambda i: "missing node name")
        t = strings(cols[type_col]) if type_col else pa.array([""] * len(rows), pa.string())
        tv = t.to_numpy(zero_copy_only=False)
        cpu_t = np.isin(tv, list(cpu_type_values))
        if type_col:
            chk.flag((g > 0) & cpu_t & (tv == ""), "missing_value", type_col,
                     lambda i: f"a node with {int(g[i])} GPUs has no GPU type")
            chk.flag((g > 0) & cpu_t & (tv != ""), "bad_gpu_type", type_col,
                     lambda i: f"a node with {int(g[i])} GPUs has type {tv[i]!r}")
        chk.drop(g == 0, "CPU-only node (0 GPUs)", lambda i: "no GPUs")
        keep = chk.done()
        names.extend(strings(pc.filter(nm, pa.array(keep))).to_pylist())
        gpus.append(g[keep])
        types.extend(tv[keep].tolist())
    return report, names, (np.concatenate(gpus).astype(np.int64) if gpus else np.zeros(0, np.int64)), types


def read_openb_nodes(path, *, gpu_type_map: Mapping[str, str] | None = None, name: str | None = None,
                     skip_invalid: bool = False) -> ClusterLoad:
    """openb node list -> Cluster (CPU-only nodes left out, counted)."""
    report, names, gpus, types = _read(path, "openb-nodes", "openb node list", "sn", "gpu", "model",
                                       ("sn", "gpu", "model"), skip_invalid=skip_invalid)
    return _build(name or "openb", report, names, gpus, types,
                  OPENB_GPU_TYPES if gpu_type_map is None else gpu_type_map)


_PAI_MACHINE_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")


def read_pai_machines(path, *, gpu_type_map: Mapping[str, str] | None = None, name: str | None = None,
                      skip_invalid: bool = False) -> ClusterLoad:
    """PAI ``pai_machine_spec`` (with or without a header) -> Cluster (CPU machines left out)."""
    header = read_header(_check_file(path))
    names_arg = None if header and header[0].strip() == "machine" else _PAI_MACHINE_COLUMNS
    report, names, gpus, types = _read(path, "pai-machines", "PAI machine spec", "machine", "cap_gpu", "gpu_type",
                                       ("machine", "gpu_type", "cap_gpu"), column_names=names_arg,
                                       skip_invalid=skip_invalid)
    return _build(name or "pai-2020", report, names, gpus, types,
                  PAI_GPU_TYPES if gpu_type_map is None else gpu_type_map)


def read_spot_nodes(path, *, gpu_type_map: Mapping[str, str] | None = None, name: str | None = None,
                    skip_invalid: bool = False) -> ClusterLoad:
    """Alibaba 2026 spot-GPU ``node_info_df.csv`` -> Cluster."""
    report, names, gpus, types = _read(path, "spot-nodes", "spot-GPU node list", "node_name", "gpu_capacity_num",
                                       "gpu_model", ("gpu_model", "gpu_capacity_num", "node_name"),
                                       skip_invalid=skip_invalid)
    return _build(name or "alibaba-spot-2026", report, [f"node{x}" for x in names], gpus, types,
                  SPOT_GPU_TYPES if gpu_type_map is None else gpu_type_map)


def read_philly_machines(path, *, gpu_type: str = PHILLY_MACHINE_GPU_TYPE, name: str | None = None,
                         skip_invalid: bool = False) -> ClusterLoad:
    """The revised Philly machine list -> Cluster (machines with 0 GPUs left out, counted)."""
    report, names, gpus, _ = _read(path, "philly-machines", "Philly machine list", "machineId", "number of GPUs",
                                   None, ("machineId", "number of GPUs"), skip_invalid=skip_invalid)
    return _build(name or "philly-machines", report, names, gpus, [gpu_type] * len(gpus), None)
