"""Sia's configurations per GPU type and its throughput ratios between types (siasosp23/artifacts
``sia-simulator/sia.py`` ``CONFIGS_4GPU``/``CONFIGS_8GPU``, ``cluster.py``
``compute_throughput_ratios``; docs/goodput.md).

* A **configuration** is (GPU type, nodes, GPUs): on a type with ``g`` GPUs per node, the powers
  of two below ``g`` on one node, then ``k`` whole nodes (``k * g`` GPUs) for ``k = 1, 2, ...`` up
  to the type's node count and :data:`MAX_CONFIG_GPUS`.  For ``g`` = 4 and 8 this is exactly Sia's
  config set (1, 2, 4, 8, 12, ..., 64 and 1, 2, 4, 8, 16, ..., 64).
* The **throughput ratio** of an application from type ``s`` to type ``t`` is its one-GPU
  throughput at the largest profiled batch on ``t`` over that on ``s`` (``local_bsz.max() /
  step_time.max()`` over the one-GPU rows of each profile): the relative-speed table Sia uses to
  bootstrap a job's goodput on a type it has not run on from its fitted model on one it has.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..errors import ConfigError
from .profiles import Application

__all__ = ["MAX_CONFIG_GPUS", "SiaConfigs", "sia_configs", "single_gpu_throughput"]

#: largest configuration, GPUs (Sia's lists end at 64: "simulator can't handle more")
MAX_CONFIG_GPUS = 64


@dataclass(frozen=True)
class SiaConfigs:
    """The configurations of a cluster, one row each: type index (into ``types``), nodes, GPUs."""

    types: tuple[str, ...]
    type_idx: np.ndarray      # int64 [C]
    nodes: np.ndarray         # int64 [C]
    gpus: np.ndarray          # int64 [C]
    per_node: np.ndarray      # int64 [n_types] GPUs per node of each type
    capacity: np.ndarray      # int64 [n_types] GPUs of each type

    def __len__(self) -> int:
        return int(self.gpus.shape[0])


def _type_configs(per_node: int, n_nodes: int, max_gpus: int) -> tuple[list[int], list[int]]:
    small = [1 << i for i in range(per_node.bit_length()) if (1 << i) < per_node]
    whole = [k for k in range(1, n_nodes + 1) if k * per_node <= max_gpus]
    return [1] * len(small) + whole, small + [k * per_node for k in whole]


def sia_configs(cluster: Cluster, max_gpus: int = MAX_CONFIG_GPUS) -> SiaConfigs:
    """Sia's configurations of every GPU type of ``cluster`` (module docstring).  A type whose
    nodes differ in size uses its largest node size."""
    if max_gpus < 1:
        raise ConfigError(f"Sia configurations: max_gpus must be >= 1, got {max_gpus}")
    per_node = np.zeros(cluster.n_types, np.int64)
    np.maximum.at(per_node, cluster.node_type, cluster.node_gpus.astype(np.int64))
    n_nodes = np.bincount(cluster.node_type, minlength=cluster.n_types)
    t_idx, nodes, gpus = [], [], []
    for t in range(cluster.n_types):
        n, g = _type_configs(int(per_node[t]), int(n_nodes[t]), max_gpus)
        t_idx += [t] * len(n)
        nodes += n
        gpus += g
    as_int = lambda x: np.asarray(x, np.int64)    # noqa: E731
    return SiaConfigs(tuple(cluster.gpu_types), as_int(t_idx), as_int(nodes), as_int(gpus), per_node,
                      cluster.gpus_per_type().astype(np.int64))


def single_gpu_throughput(app: Application) -> float:
    """Samples per second of one GPU at the largest profiled batch: ``max local_bsz / max
    step_time`` over the one-GPU placement rows (Sia's ``mean_*_atomic_xput``)."""
    row = app.placements.get(1)
    if row is None:
        raise ConfigError(f"application {app.name!r}: no one-GPU placement rows to derive its relative "
                          f"speed from ({app.folder})")
    local, step, _ = row
    return float(local.max() / step.max())
