"""Per-model gradient sizes for the all-reduce term of SMJP's latency model, and per-GPU batches.

A data-parallel job all-reduces one gradient per parameter every iteration, so its gradient
size is ``parameters x bytes_per_param`` (fp32: 4 bytes).  The parameter table and
:func:`gradient_bytes` live in :mod:`sim.network` (the engine's network term reads them too) and
are re-exported here.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from ..network import BYTES_PER_PARAM, DEFAULT_PARAMETERS, PARAMETERS, gradient_bytes

__all__ = ["PARAMETERS", "DEFAULT_PARAMETERS", "BYTES_PER_PARAM", "DEFAULT_BATCH",
           "gradient_bytes", "per_gpu_batch"]

#: Per-GPU batch of a model whose name gives none (Gavel names carry "(batch size N)").  Only
#: the integer split of samples uses it.  Our choice [I].
DEFAULT_BATCH = 32

_BATCH = re.compile(r"\(batch size (\d+)\)", re.IGNORECASE)


def per_gpu_batch(models: Sequence[str], default: int = DEFAULT_BATCH) -> np.ndarray:
    """int64 [len(models)]: the per-GPU batch in a model's name, else ``default``."""
    found = [_BATCH.search(str(m)) for m in models]
    return np.asarray([int(f.group(1)) if f else int(default) for f in found], np.int64)
