"""Measurements of one (model, GPU type) as float64 arrays, grouped from a measurement table."""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .schema import validate_measurements

__all__ = ["Observations", "group_observations", "even_max_per_node", "ape"]


@dataclass(frozen=True)
class Observations:
    """The measurements of one (model, GPU type) as float64 arrays (NaN = not measured)."""

    model: str
    gpu_type: str
    n_gpus: np.ndarray
    n_nodes: np.ndarray
    local_bsz: np.ndarray
    step: np.ndarray
    sync: np.ndarray
    data: np.ndarray
    forward: np.ndarray
    backward: np.ndarray
    update: np.ndarray
    max_per_node: np.ndarray
    placement_key: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return int(self.step.shape[0])

    def subset(self, mask: np.ndarray) -> "Observations":
        mask = np.asarray(mask, bool)
        arrays = {f.name: getattr(self, f.name)[mask] for f in fields(self)
                  if isinstance(getattr(self, f.name), np.ndarray)}
        keys = tuple(k for k, m in zip(self.placement_key, mask) if m) if self.placement_key else ()
        return replace(self, **arrays, placement_key=keys)

    @classmethod
    def from_arrays(cls, model: str, gpu_type: str, *, n_gpus, n_nodes, local_bsz, step, sync=None,
                    data=None, forward=None, backward=None, update=None,
                    max_per_node=None) -> "Observations":
        n = len(step)

        def arr(v):
            return np.full(n, np.nan) if v is None else np.asarray(v, dtype=np.float64)
        k, nn = arr(n_gpus), arr(n_nodes)
        kmax = even_max_per_node(k, nn) if max_per_node is None else arr(max_per_node)
        return cls(model, gpu_type, k, nn, arr(local_bsz), arr(step), arr(sync),
                   arr(data), arr(forward), arr(backward), arr(update), kmax)


def even_max_per_node(n_gpus, n_nodes) -> np.ndarray:
    """Most GPUs on one server when ``n_gpus`` are spread evenly over ``n_nodes``."""
    k = np.asarray(n_gpus, dtype=np.float64)
    return np.ceil(k / np.maximum(np.asarray(n_nodes, dtype=np.float64), 1.0))


def _col(t: pa.Table, name: str) -> np.ndarray:
    return np.asarray(pc.cast(t.column(name), pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False))


def _placement_keys(t: pa.Table) -> tuple[tuple[str, ...], np.ndarray]:
    """Per row: a placement key (``"3|3"``, or ``"2n6g"`` without a list) and the most GPUs on
    one server (the list's max, else an even spread)."""
    pl = t.column("placement").to_pylist()
    nn, kk = t.column("n_nodes").to_pylist(), t.column("n_gpus").to_pylist()
    keys = tuple("|".join(map(str, p)) if p else f"{n}n{k}g" for p, n, k in zip(pl, nn, kk))
    even = even_max_per_node(kk, nn)
    kmax = np.array([max(p) if p else e for p, e in zip(pl, even)], dtype=np.float64)
    return keys, kmax


def group_observations(table: pa.Table, source: str = "<memory>") -> dict[tuple[str, str], Observations]:
    """Split a measurement table by (model, GPU type), sorted by key."""
    t = validate_measurements(table, source)
    models = np.array(t.column("model").to_pylist(), dtype=object)
    types = np.array(t.column("gpu_type").to_pylist(), dtype=object)
    cols = {c: _col(t, c) for c in ("n_gpus", "n_nodes", "local_bsz", "step_time_s", "sync_time_s",
                                    "data_time_s", "forward_s", "backward_s", "update_s")}
    keys, kmax = _placement_keys(t)
    out = {}
    for m, g in sorted(set(zip(models.tolist(), types.tolist()))):
        sel = (models == m) & (types == g)
        out[(m, g)] = Observations(
            m, g, cols["n_gpus"][sel], cols["n_nodes"][sel], cols["local_bsz"][sel],
            cols["step_time_s"][sel], cols["sync_time_s"][sel], cols["data_time_s"][sel],
            cols["forward_s"][sel], cols["backward_s"][sel], cols["update_s"][sel], kmax[sel],
            tuple(k for k, s in zip(keys, sel) if s))
    return out


def ape(predicted, measured) -> np.ndarray:
    """Absolute percentage error, in percent."""
    return np.abs(np.asarray(predicted) / np.asarray(measured) - 1.0) * 100.0
