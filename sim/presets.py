"""Built-in clusters that match the clusters of published evaluations.

:func:`load_cluster` resolves any cluster spec: a preset name, the ``uniform:`` form or a TOML
file.  Every preset is built from constants in this file; none reads ``../shared`` or any other file.
Choices the sources leave open are marked "our choice" and can be overridden with a TOML file
(see :mod:`sim.cluster`).

=========== ======================================================================================
name        what
=========== ======================================================================================
gavel-108   Gavel's simulated cluster 36:36:36 (V100:P100:K80) [Narayanan et al., OSDI'20; gavel
            EXPERIMENTS.md ``-c 36:36:36``].  Gavel's simulator defaults to 1 GPU per server
            (``--num_gpus_per_server 1:1:1``); we use **4 GPUs per server** (our choice: the
            4-GPU cloud instances of that era, e.g. AWS p3.8xlarge; it lets 2- and 4-GPU jobs be
            consolidated).  9 servers of each type, 27 in all.
pollux-64   Pollux's testbed and its simulator's default [Qiao et al., OSDI'21; petuum/adaptdl
            ``simulator/simulator.py`` --min-nodes 16 --num-gpus 4]: 16 x 4 T4.
sia-64      Sia's 64-GPU physical cluster [Jayaram Subramanya et al., SOSP'23]: 6 x 4 T4,
            3 x 8 RTX 2080 Ti, 2 x 8 A100.  A100 servers get NVLink bandwidth (DGX A100,
            600 GB/s); other bandwidths are the defaults (our choice).
hops-512    Hops' simulated cluster [Wang et al., SoCC'24 §4; algorithms.md §4.11]: 16 x 8
            GTX 1080 Ti, 16 x 8 Titan Xp, 16 x 8 RTX 3090 (Sugon), 8 x 8 RTX 3090 (TIGERWAY
            YK8100-8G), 8 x 8 RTX 3090 (YK8100-10G).  The three RTX 3090 server models share GPU
            type "rtx3090"; their node names say the server model (``rtx3090-sugon-*``,
            ``rtx3090-yk8g-*``, ``rtx3090-yk10g-*``).  Every visible speed factor is 1: the
            server-entity differences Hops senses are hidden (HOPS_RTX3090_SPEED, our choice,
            applied by :class:`sim.hops.servers.ServerTruth`, never by the cluster itself).
            Inter-node 100 Gb/s (the paper's InfiniBand).
hops-64     Hops' physical cluster: 2 x 8 GTX 1080 Ti, 4 x 8 Titan Xp, 2 x 4 RTX 3090 (Sugon),
            2 x 4 RTX 3090 (YK8100-8G); 10 servers, 64 GPUs.
philly      The revised Philly machine list [Jeon et al., ATC'19; Qinghao-Hu/Philly-Trace-Scripts
            ``data/revised_machine_list.csv``, see msr-fiddle/philly-traces#8]: 271 x 4, 264 x 8,
            3 x 2, 1 x 3 GPUs = 3,205 GPUs on 539 machines.  The 13 machines with 0 GPUs are
            omitted (a node must have GPUs).  The trace gives no GPU model per machine; we use
            **"p100"** (our choice: a Pascal data-centre GPU of 2017; override with a TOML file).
=========== ======================================================================================
"""
from __future__ import annotations

import os
from typing import Callable

from .cluster import (DEFAULT_INTER_BW_GBPS, DEFAULT_INTRA_BW_GBPS, Cluster, cluster_from_groups,
                      cluster_from_toml, parse_uniform)
from .errors import ConfigError

__all__ = ["PRESETS", "list_presets", "get_preset", "load_cluster", "HOPS_RTX3090_SPEED", "HOPS_SERVER_PREFIX", "GAVEL_GPUS_PER_SERVER",
           "PHILLY_GPU_TYPE", "PHILLY_MACHINES"]

#: GPUs per server in ``gavel-108`` (our choice; Gavel's own simulator default is 1).
GAVEL_GPUS_PER_SERVER = 4

#: Hidden speed factors of the three RTX 3090 server models of Hops.  Our choice [I]: the paper
#: reports server-entity heterogeneity among them but no factor; we order them by host CPU
#: generation (Xeon Gold 5118 Skylake -> 5218 Cascade Lake -> Xeon 5320 Ice Lake) with 10% steps.
#: They are not the presets' visible ``node_speed`` (all 1): :class:`sim.hops.servers.ServerTruth`
#: applies them, keyed by the node-name prefixes of :data:`HOPS_SERVER_PREFIX`.
HOPS_RTX3090_SPEED = {"sugon": 0.9, "yk8100-8g": 1.0, "yk8100-10g": 1.1}

#: node-name prefix of each RTX 3090 server model in ``hops-512`` / ``hops-64``
HOPS_SERVER_PREFIX = {"sugon": "rtx3090-sugon-", "yk8100-8g": "rtx3090-yk8g-",
                      "yk8100-10g": "rtx3090-yk10g-"}

#: Hops' servers are connected by 100 Gb InfiniBand (paper §4).
HOPS_INTER_BW_GBPS = 100.0

#: NVLink 3 in a DGX A100: 600 GB/s per GPU = 4800 Gbit/s (NVIDIA DGX A100 datasheet).
A100_NVLINK_GBPS = 4800.0

#: GPU type of the ``philly`` preset (our choice, see the module docstring).
PHILLY_GPU_TYPE = "p100"

#: (machines, GPUs per machine) of the revised Philly machine list, zero-GPU machines omitted.
PHILLY_MACHINES = ((271, 4), (264, 8), (3, 2), (1, 3))


def _gavel_108() -> Cluster:
    per = 36 // GAVEL_GPUS_PER_SERVER
    return cluster_from_groups("gavel-108", [
        {"count": per, "gpus": GAVEL_GPUS_PER_SERVER, "type": t, "name_prefix": f"{t}-"}
        for t in ("v100", "p100", "k80")], source="preset gavel-108")


def _pollux_64() -> Cluster:
    return cluster_from_groups("pollux-64", [{"count": 16, "gpus": 4, "type": "t4", "name_prefix": "t4-"}],
                               source="preset pollux-64")


def _sia_64() -> Cluster:
    return cluster_from_groups("sia-64", [
        {"count": 6, "gpus": 4, "type": "t4", "name_prefix": "t4-"},
        {"count": 3, "gpus": 8, "type": "rtx2080ti", "name_prefix": "rtx2080ti-"},
        {"count": 2, "gpus": 8, "type": "a100", "intra_bw_gbps": A100_NVLINK_GBPS, "name_prefix": "a100-"},
    ], source="preset sia-64")


def _hops(name: str, groups) -> Cluster:
    return cluster_from_groups(name, [
        {"count": c, "gpus": g, "type": t, "speed": s, "inter_bw_gbps": HOPS_INTER_BW_GBPS,
         "intra_bw_gbps": DEFAULT_INTRA_BW_GBPS, "name_prefix": p}
        for c, g, t, s, p in groups], source=f"preset {name}")


def _hops_512() -> Cluster:
    pre = HOPS_SERVER_PREFIX
    return _hops("hops-512", [
        (16, 8, "gtx1080ti", 1.0, "gtx1080ti-"),
        (16, 8, "titanxp", 1.0, "titanxp-"),
        (16, 8, "rtx3090", 1.0, pre["sugon"]),
        (8, 8, "rtx3090", 1.0, pre["yk8100-8g"]),
        (8, 8, "rtx3090", 1.0, pre["yk8100-10g"]),
    ])


def _hops_64() -> Cluster:
    pre = HOPS_SERVER_PREFIX
    return _hops("hops-64", [
        (2, 8, "gtx1080ti", 1.0, "gtx1080ti-"),
        (4, 8, "titanxp", 1.0, "titanxp-"),
        (2, 4, "rtx3090", 1.0, pre["sugon"]),
        (2, 4, "rtx3090", 1.0, pre["yk8100-8g"]),
    ])


def _philly() -> Cluster:
    return cluster_from_groups("philly", [
        {"count": c, "gpus": g, "type": PHILLY_GPU_TYPE, "inter_bw_gbps": DEFAULT_INTER_BW_GBPS,
         "name_prefix": f"m{g}gpu-"} for c, g in PHILLY_MACHINES], source="preset philly")


#: name -> (one-line description, builder)
PRESETS: dict[str, tuple[str, Callable[[], Cluster]]] = {
    "gavel-108": ("Gavel's simulated cluster: 36 V100, 36 P100, 36 K80 (4 GPUs per server)", _gavel_108),
    "pollux-64": ("Pollux's testbed: 16 x 4 T4 (its simulator's default; the policies' rounds are 60 s)",
                  _pollux_64),
    "sia-64": ("Sia's physical cluster: 6x4 T4, 3x8 RTX 2080 Ti, 2x8 A100", _sia_64),
    "hops-512": ("Hops' simulated cluster: 16x8 GTX1080Ti, 16x8 TitanXp, 32x8 RTX3090 (3 server models)",
                 _hops_512),
    "hops-64": ("Hops' physical cluster: 2x8 GTX1080Ti, 4x8 TitanXp, 4x4 RTX3090 (2 server models)",
                _hops_64),
    "philly": ("Microsoft Philly, revised machine list: 271x4, 264x8, 3x2, 1x3 GPUs (3,205 GPUs)", _philly),
}

_cache: dict[str, Cluster] = {}


def list_presets() -> dict[str, str]:
    """Preset name -> one-line description."""
    return {k: v[0] for k, v in PRESETS.items()}


def get_preset(name: str) -> Cluster:
    """Build (once; clusters are immutable) and return a preset cluster."""
    if name not in PRESETS:
        raise ConfigError(f"unknown cluster preset {name!r} (known: {', '.join(PRESETS)})")
    if name not in _cache:
        _cache[name] = PRESETS[name][1]()
    return _cache[name]


def load_cluster(spec: str | os.PathLike) -> Cluster:
    """A preset name, ``uniform:nodes=N,gpus=G[,type=T][,speed=S]``, or a path to a TOML file."""
    if isinstance(spec, os.PathLike):
        return cluster_from_toml(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"cluster spec must be a non-empty string, got {spec!r}")
    spec = spec.strip()
    if spec in PRESETS:
        return get_preset(spec)
    if spec.startswith("uniform:"):
        return parse_uniform(spec)
    if spec.endswith(".toml") or os.sep in spec or os.path.exists(spec):
        return cluster_from_toml(spec)
    raise ConfigError(f"unknown cluster {spec!r}: not a preset ({', '.join(PRESETS)}), "
                      f"not uniform:nodes=N,gpus=G[,type=T], and not a TOML file")
