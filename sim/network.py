"""Communication time of distributed placements: how cluster bandwidths enter the rates of every
policy (docs/network.md).

A data-parallel job on ``k`` GPUs all-reduces its gradients once per iteration.  A ring
all-reduce of ``D`` bytes over a slowest link of ``B`` bytes/s takes

    c(k, B) = 2 (k - 1) / k * D / B              (0 for one GPU; SMJP's term, sim.smjp.latency)

The slowest link of a placement on one node is that node's intra-node bandwidth; across nodes it
is the smallest inter-node bandwidth of the nodes used.  ``D`` is ``parameters x 4`` bytes (fp32)
from :data:`PARAMETERS`, keyed by model family.

**No double counting.**  An oracle's measured rate ``r(k)`` already holds the communication over
the network it was measured on.  The oracle names those bandwidths
(``reference_bandwidth_gbps = (intra, inter)``; :class:`~sim.throughput.TableThroughput`: the
cluster defaults :data:`~sim.cluster.DEFAULT_INTRA_BW_GBPS` and
:data:`~sim.cluster.DEFAULT_INTER_BW_GBPS`).  On a link ``B`` other than the reference ``B0`` of
the same kind, the measured communication is replaced by the one at ``B``:

    tau   = k / r(k)                                 measured seconds per iteration (work counts
                                                     per-GPU batches: an iteration of k GPUs is k)
    c0    = min(c(k, B0), COMM_SHARE_CAP * tau)      its communication part
    tau'  = tau + c0 * (B0 / B - 1)                  = tau - c(k, B0) + c(k, B) when c0 = c(k, B0)
    rate  = k / tau'                                 (0 on a link of bandwidth 0)

At the reference bandwidths the oracle's rate is returned unchanged, bit for bit.  A rate from a
policy's own placement-level rate model (SMJP's, which has this term itself) is never corrected.
Oracles whose rates hold the network of their own testbed in a fitted model, or replay recorded
run times (``reference_bandwidth_gbps = None``: Pollux/Sia goodput, calibrated step-time models,
the trace replay oracle), do not read bandwidths: a run with such an oracle on a cluster whose
bandwidths differ from the defaults warns (:class:`BandwidthWarning`).

The engine caches rates per placement summary (GPU types used, GPU and node counts, slowest
server speed; also inside the C kernel), so the bandwidths a rate depends on must follow from
that summary: every node of one GPU type must have the same bandwidths
(:func:`type_bandwidths`; a cluster that breaks this is a ConfigError when the model would
read them).
"""
from __future__ import annotations

import warnings
from typing import Mapping, Sequence

import numpy as np

from .cluster import DEFAULT_INTER_BW_GBPS, DEFAULT_INTRA_BW_GBPS, Cluster
from .errors import ConfigError
from .throughput import model_family

__all__ = ["PARAMETERS", "DEFAULT_PARAMETERS", "BYTES_PER_PARAM", "GBIT_BYTES", "COMM_SHARE_CAP",
           "BandwidthWarning", "NetworkRates", "comm_time", "gradient_bytes", "type_bandwidths",
           "rate_oracle"]

#: bytes/s in one Gbit/s (cluster bandwidths are given in Gbit/s)
GBIT_BYTES = 1e9 / 8.0

#: Largest share of a measured iteration taken as communication.  Our choice [I]: a guard that
#: keeps a faster link from shrinking an iteration below a tenth of the measured one; on the
#: built-in Gavel table the ring term at the default bandwidths is at most 67% of an iteration,
#: so the cap never binds there.
COMM_SHARE_CAP = 0.9

#: Parameter counts per model family (lowercase, without Gavel's ``" (batch size N)"`` suffix;
#: sim.throughput.model_family).  [C] counted from the cited code or paper; [I] our estimate.
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
#: Parameters of a model not in the table (e.g. a test oracle's "m0", a trace's "trace").  Our
#: choice [I]: ResNet-50, the median-sized model above.
DEFAULT_PARAMETERS = 25_557_032.0
#: fp32 gradients.
BYTES_PER_PARAM = 4.0


class BandwidthWarning(UserWarning):
    """Cluster bandwidths that the run's throughput model does not read."""


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


def comm_time(n_workers: np.ndarray, grad_bytes: np.ndarray, r_min: np.ndarray) -> np.ndarray:
    """Seconds of one ring all-reduce: ``2 (n-1)/n * D / r_min``; 0 for one worker."""
    n = np.asarray(n_workers, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = 2.0 * (n - 1.0) / n * grad_bytes / r_min
    return np.where(n > 1, np.where(r_min > 0, t, np.inf), 0.0)


def type_bandwidths(cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """(intra, inter) Gbit/s per GPU type of ``cluster``; ConfigError if two nodes of one type
    differ (the rate of a placement must follow from its summary, see the module docstring)."""
    out = []
    for field in ("intra_bw_gbps", "inter_bw_gbps"):
        values = np.asarray(getattr(cluster, field), float)
        per_type = np.zeros(len(cluster.gpu_types))
        for t, name in enumerate(cluster.gpu_types):
            seen = np.unique(values[cluster.node_type == t])
            if seen.size > 1:
                raise ConfigError(
                    f"cluster {cluster.name!r}: nodes of GPU type {name!r} have different {field} "
                    f"({', '.join(f'{v:g}' for v in seen[:4])}): the throughput model reads one "
                    f"bandwidth per GPU type (docs/network.md)")
            per_type[t] = seen[0] if seen.size else np.inf
        out.append(per_type)
    return out[0], out[1]


class NetworkRates:
    """An oracle's rates with the communication term at the cluster's bandwidths (module
    docstring).  Only :meth:`rates` is wrapped: it is what the engine asks for a placement's
    rate; policies keep reading the oracle itself."""

    def __init__(self, oracle, cluster: Cluster, reference: tuple[float, float]):
        self.oracle = oracle
        self.cluster_types = tuple(cluster.gpu_types)
        self.intra, self.inter = type_bandwidths(cluster)
        self.ref_intra, self.ref_inter = (float(b) for b in reference)
        self.grad = gradient_bytes(tuple(getattr(oracle, "models", ())))

    def __getattr__(self, name):
        return getattr(self.oracle, name)

    def slowest_link(self, ngpu, n_nodes, type_mask) -> tuple[np.ndarray, np.ndarray]:
        """(bandwidth, reference bandwidth) in Gbit/s of each placement's slowest link."""
        bits = (np.asarray(type_mask, np.int64)[:, None] >> np.arange(len(self.cluster_types))) & 1
        spread = np.asarray(n_nodes) > 1
        per_type = np.where(spread[:, None], self.inter[None, :], self.intra[None, :])
        link = np.where(bits == 1, per_type, np.inf).min(axis=1)
        return link, np.where(spread, self.ref_inter, self.ref_intra)

    def rates(self, model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types) -> np.ndarray:
        base = np.asarray(self.oracle.rates(model_idx, ngpu, n_nodes, type_mask, min_speed,
                                            cluster_types), float)
        if tuple(cluster_types) != self.cluster_types:
            raise ConfigError(f"network rates: cluster types {tuple(cluster_types)} are not the "
                              f"run's {self.cluster_types}")
        k = np.asarray(ngpu, np.int64).ravel()
        link, ref = self.slowest_link(k, np.asarray(n_nodes).ravel(), np.asarray(type_mask).ravel())
        change = np.flatnonzero((k > 1) & (link != ref) & (base.ravel() > 0))
        if not change.size:
            return base
        out = base.ravel().copy()
        out[change] = self._corrected(out[change], k[change], np.asarray(model_idx).ravel()[change],
                                      link[change], ref[change])
        return out.reshape(base.shape)

    def _corrected(self, rate, k, model, link, ref) -> np.ndarray:
        tau = k / rate
        c0 = np.minimum(comm_time(k, self.grad[model], ref * GBIT_BYTES), COMM_SHARE_CAP * tau)
        with np.errstate(divide="ignore"):
            tau_new = tau + c0 * (ref / link - 1.0)
            return np.where(link > 0, k / tau_new, 0.0)


def rate_oracle(oracle, cluster: Cluster):
    """What the engine asks for placement rates: ``oracle`` wrapped in :class:`NetworkRates`
    when it names the bandwidths its rates hold (``reference_bandwidth_gbps``) and the cluster's
    differ from them; ``oracle`` itself otherwise (bit-identical rates).  Warns
    (:class:`BandwidthWarning`) when the cluster's bandwidths differ from the defaults and the
    oracle does not read them."""
    reference = getattr(oracle, "reference_bandwidth_gbps", None)
    if reference is None:
        _warn_unread(oracle, cluster)
        return oracle
    ref_intra, ref_inter = (float(b) for b in reference)
    if (np.all(cluster.intra_bw_gbps == ref_intra) and np.all(cluster.inter_bw_gbps == ref_inter)):
        return oracle
    return NetworkRates(oracle, cluster, (ref_intra, ref_inter))


def _warn_unread(oracle, cluster: Cluster) -> None:
    if np.all(cluster.intra_bw_gbps == DEFAULT_INTRA_BW_GBPS) and \
            np.all(cluster.inter_bw_gbps == DEFAULT_INTER_BW_GBPS):
        return
    name = getattr(oracle, "source", None) or type(oracle).__name__
    warnings.warn(BandwidthWarning(
        f"cluster {cluster.name!r}: its bandwidths differ from the defaults "
        f"({DEFAULT_INTRA_BW_GBPS:g}/{DEFAULT_INTER_BW_GBPS:g} Gbit/s intra/inter) but the "
        f"throughput model {name} does not read bandwidths (its rates already hold a network: "
        f"measured, fitted or recorded): they change nothing in this run (docs/network.md)"), stacklevel=3)
