"""Per-model gradient sizes for the all-reduce term of SMJP's latency model.

A data-parallel job all-reduces one gradient per parameter every iteration, so its gradient
size is ``parameters x bytes_per_param`` (fp32: 4 bytes).  Parameter counts are keyed by model
family (lowercase, without Gavel's ``" (batch size N)"`` suffix; sim.throughput.model_family).
Sources: [C] counted from the cited code or paper; [I] our estimate, the source leaves it open.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from ..throughput import model_family

__all__ = ["PARAMETERS", "DEFAULT_PARAMETERS", "BYTES_PER_PARAM", "DEFAULT_BATCH",
           "gradient_bytes", "per_gpu_batch"]

#: Parameter counts per model family.
PARAMETERS: dict[str, float] = {
    # Gavel's models (stanford-futuredata/gavel workloads/pytorch)
    "resnet-18": 11_173_962,    # [C] kuangliu/pytorch-cifar ResNet18 (CIFAR-10), Gavel's model
    "resnet-50": 25_557_032,    # [C] torchvision resnet50 (He et al., CVPR'16)
    "transformer": 65_000_000,  # [C] Vaswani et al., NeurIPS'17, Table 3 "base" (65M); [I]
                                #     Gavel's Multi30k vocabulary is smaller
    "lm": 13_987_678,           # [C] pytorch/examples word_language_model defaults (2-layer
                                #     LSTM, 200 units, Wikitext-2 vocabulary 33,278)
    "cyclegan": 28_286_000,     # [C] junyanz/pytorch-CycleGAN-and-pix2pix: 2 x 11.378M
                                #     ResNet generators + 2 x 2.765M PatchGAN discriminators
    "a3c": 800_000,             # [I] ikostrikov/pytorch-a3c Atari conv + LSTM-256, about 0.8M
    "recommendation": 7_000_000,  # [I] Gavel's ML-20M autoencoder; size not stated
    # Pollux / Sia models (petuum/adaptdl benchmarks; siasosp23/artifacts)
    "imagenet": 25_557_032,     # [C] ResNet-50, as above
    "cifar10": 11_173_962,      # [C] ResNet-18 (CIFAR), as above
    "bert": 110_000_000,        # [C] BERT-base (Devlin et al., NAACL'19), SQuAD fine-tuning
    "yolov3": 61_949_149,       # [C] YOLOv3-416 (Redmon and Farhadi 2018; ultralytics summary)
    "deepspeech2": 38_000_000,  # [I] deepspeech.pytorch DeepSpeech2, about 38M
    "ncf": 5_000_000,           # [I] NeuMF on MovieLens, embeddings dominate; about 5M
}
#: Parameters of a model not in the table (e.g. a test oracle's "m0").  Our choice [I]:
#: ResNet-50, the median-sized model above.
DEFAULT_PARAMETERS = 25_557_032.0
#: fp32 gradients.
BYTES_PER_PARAM = 4.0
#: Per-GPU batch of a model whose name gives none (Gavel names carry "(batch size N)").  Only
#: the integer split of samples uses it.  Our choice [I].
DEFAULT_BATCH = 32

_BATCH = re.compile(r"\(batch size (\d+)\)", re.IGNORECASE)


def gradient_bytes(models: Sequence[str], table: Mapping[str, float] | None = None,
                   default_params: float = DEFAULT_PARAMETERS,
                   bytes_per_param: float = BYTES_PER_PARAM) -> np.ndarray:
    """float64 [len(models)]: bytes all-reduced per iteration by each model."""
    if not (default_params >= 0 and bytes_per_param > 0):
        raise ConfigError(f"gradient sizes: default_params must be >= 0 and bytes_per_param > 0, "
                          f"got {default_params!r} and {bytes_per_param!r}")
    table = PARAMETERS if table is None else table
    low = {k.lower(): float(v) for k, v in table.items()}
    params = [low.get(str(m).lower(), low.get(model_family(str(m)), default_params)) for m in models]
    return np.asarray(params, float) * bytes_per_param


def per_gpu_batch(models: Sequence[str], default: int = DEFAULT_BATCH) -> np.ndarray:
    """int64 [len(models)]: the per-GPU batch in a model's name, else ``default``."""
    found = [_BATCH.search(str(m)) for m in models]
    return np.asarray([int(f.group(1)) if f else int(default) for f in found], np.int64)
