"""``clustersim collect``: time real training steps with PyTorch and record the measurement schema.

Three small standard models are defined here (:data:`MODELS`): ``mlp`` (1024-1024-1024-10, ReLU),
``cnn`` (a small residual CNN on 3x32x32 images, batch norm) and ``transformer`` (a 2-layer,
4-head, d=128 encoder over 64 tokens with mean pooling).  Each trains with SGD + momentum on a
synthetic, learnable data set (labels from a fixed random teacher) read through a ``DataLoader``.

For every model, per-GPU batch size and GPU count it records one row: after ``warmup`` steps,
``steps`` synchronising steps are timed phase by phase (the device is synchronised at each phase
boundary) -- data loading (next batch and copy to the device), forward (with the loss), backward
(which includes the overlapped gradient all-reduce of DDP), update -- and then ``steps``
gradient-accumulation steps (forward and backward under ``DistributedDataParallel.no_sync()``,
no update).  ``step_time_s`` is the median synchronising step, ``sync_time_s`` the median
synchronising step minus the median accumulation step (Pollux's definition; on one GPU it is the
update).  With several GPUs every rank times its own steps and the slowest rank's times are
recorded (the slowest worker sets the pace).

Several GPU counts run when several CUDA devices are visible: each count ``K > 1`` spawns ``K``
processes joined by ``torch.distributed`` (NCCL on CUDA, Gloo on the CPU) on this machine, so the
rows have ``n_nodes = 1``.  The same code runs on the CPU (Gloo, each process one "device") for
tests; CPU rows get ``gpu_type = "cpu"`` and are only good for checking the pipeline.

Optionally (``--learning-curves``) each model trains for a few epochs and one row per epoch records
the validation accuracy and the mean normalized entropy of the validation logits
(:func:`sim.entropy.normalized_entropy`).

torch is an optional dependency (``pip install 'clustersim[collect]'``); it is imported only when a
collection runs.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import socket
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import pyarrow as pa

from ..errors import ConfigError
from .schema import (CalibrationWarning, learning_curves_from_rows, measurements_from_rows,
                     read_trace_info, write_learning_curves, write_measurements)

__all__ = ["MODELS", "CollectConfig", "collect", "learning_curves", "trace_info", "gpu_type_name",
           "require_torch", "default_config"]

MODELS = ("mlp", "cnn", "transformer")
_N_CLASSES = 10
_SEQ, _VOCAB = 64, 2000


def require_torch():
    """Import torch, or raise a ConfigError that says how to install it."""
    try:
        import torch
    except ImportError:
        raise ConfigError("clustersim collect needs PyTorch, an optional extra: "
                          "pip install 'clustersim[collect]'") from None
    return torch


def gpu_type_name(device_name: str) -> str:
    """``"NVIDIA A100-SXM4-40GB"`` -> ``"a100"``, ``"Tesla T4"`` -> ``"t4"``, ``"NVIDIA H200"`` -> ``"h200"``."""
    s = device_name.lower()
    s = re.sub(r"\b(nvidia|tesla|geforce|corporation)\b", " ", s)
    s = re.sub(r"\d+\s*gb\b", " ", s)
    s = re.sub(r"[-_\s](sxm\d*|pcie|hbm\d*e?|nvl|mig.*)\b", " ", s)
    s = re.sub(r"[\s_\-]+", "", s)
    return s or "unknown"


@dataclass
class CollectConfig:
    """What to measure.  ``gpus``: GPU counts (1 = one process; K > 1 = K processes)."""

    models: tuple[str, ...] = MODELS
    batch_sizes: tuple[int, ...] = (16, 32, 64, 128, 256)
    gpus: tuple[int, ...] = (1,)
    device: str = "cuda"                  # "cuda" or "cpu"
    warmup: int = 5
    steps: int = 20
    dataset_size: int = 4096
    workers: int = 0                      # DataLoader worker processes
    seed: int = 0
    gpu_type: str | None = None           # default: from the device name ("cpu" on the CPU)
    server_id: str | None = None          # default: host name
    lr: float = 0.05
    threads: int | None = None            # CPU threads per process (default: 1 on the CPU)

    def validate(self) -> None:
        bad = [m for m in self.models if m not in MODELS]
        if bad:
            raise ConfigError(f"unknown model(s) {', '.join(bad)} (known: {', '.join(MODELS)})")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            raise ConfigError("batch sizes must be >= 1")
        if not self.gpus or min(self.gpus) < 1:
            raise ConfigError("GPU counts must be >= 1")
        if self.steps < 1 or self.warmup < 0:
            raise ConfigError("steps must be >= 1 and warmup >= 0")
        if self.device not in ("cuda", "cpu"):
            raise ConfigError(f"device must be 'cuda' or 'cpu', got {self.device!r}")


def default_config(device: str | None = None, *, reduced: bool | None = None) -> CollectConfig:
    """CUDA when available: the full grid over 1, 2, 4, ... visible GPUs; on the CPU a reduced grid."""
    torch = require_torch()
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if reduced is None:
        reduced = device == "cpu"
    if device == "cuda":
        n = torch.cuda.device_count()
        counts = sorted({k for k in (1, 2, 4, 8, 16) if k <= n} | {n})
    else:
        counts = [1]
    if reduced:
        return CollectConfig(batch_sizes=(4, 8, 16), gpus=tuple(counts), device=device, warmup=2, steps=5,
                             dataset_size=512)
    return CollectConfig(batch_sizes=(16, 32, 64, 128, 256, 512), gpus=tuple(counts), device=device)


# ----------------------------------------------------------------------------- models and data
def build_model(name: str, torch):
    """(module, number of classes) of one of :data:`MODELS`."""
    nn = torch.nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, _N_CLASSES))
    if name == "cnn":
        class Block(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                                          nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))

            def forward(self, x):
                return torch.relu(x + self.body(x))

        def conv(ci, co, stride):
            return nn.Sequential(nn.Conv2d(ci, co, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(co),
                                 nn.ReLU())
        return nn.Sequential(conv(3, 32, 1), conv(32, 64, 2), Block(64), conv(64, 128, 2), Block(128),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, _N_CLASSES))
    if name == "transformer":
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(_VOCAB, 128)
                self.pos = nn.Parameter(torch.zeros(1, _SEQ, 128))
                layer = nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0, batch_first=True)
                self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
                self.head = nn.Linear(128, _N_CLASSES)

            def forward(self, tokens):
                h = self.enc(self.emb(tokens) + self.pos)
                return self.head(h.mean(dim=1))
        return Encoder()
    raise ConfigError(f"unknown model {name!r} (known: {', '.join(MODELS)})")


def make_dataset(name: str, n: int, torch, seed: int = 0):
    """A learnable synthetic data set: inputs at random, labels from a fixed random teacher."""
    g = torch.Generator().manual_seed(seed + 7919)
    if name == "mlp":
        x = torch.randn(n, 1024, generator=g)
        feat = x
    elif name == "cnn":
        x = torch.randn(n, 3, 32, 32, generator=g)
        feat = torch.nn.functional.avg_pool2d(x, 8).flatten(1)
    else:
        x = torch.randint(0, _VOCAB, (n, _SEQ), generator=g)
        feat = torch.zeros(n, 64).scatter_add_(1, x % 64, torch.ones(n, _SEQ))
    w = torch.randn(feat.shape[1], _N_CLASSES, generator=g)
    y = (feat @ w).argmax(dim=1)
    return torch.utils.data.TensorDataset(x, y)


# ----------------------------------------------------------------------------- timing
class _Timer:
    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.type == "cuda"

    def now(self) -> float:
        if self.cuda:
            self.torch.cuda.synchronize()
        return time.perf_counter()


def _loader(ds, batch, workers, torch, seed, cuda, sampler=None):
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=sampler is None, sampler=sampler,
                                       drop_last=True, num_workers=workers, pin_memory=cuda,
                                       generator=torch.Generator().manual_seed(seed) if sampler is None else None,
                                       persistent_workers=workers > 0)


def _measure(name: str, batch: int, cfg: CollectConfig, torch, device, rank: int, world: int) -> dict:
    """Median phase times of one (model, batch) on this rank."""
    torch.manual_seed(cfg.seed)
    model = build_model(name, torch).to(device)
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    need = batch * (cfg.warmup + 2 * cfg.steps + 2)
    ds = make_dataset(name, max(cfg.dataset_size, min(need, 8 * cfg.dataset_size), batch * 2), torch, cfg.seed)
    sampler = None
    if world > 1:
        sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=world, rank=rank,
                                                                  shuffle=True, seed=cfg.seed, drop_last=True)
    cuda = device.type == "cuda"
    dl = _loader(ds, batch, cfg.workers, torch, cfg.seed, cuda, sampler)
    timer = _Timer(torch, device)
    state = {"it": iter(dl), "epoch": 0}

    def next_batch():
        try:
            return next(state["it"])
        except StopIteration:
            state["epoch"] += 1
            if sampler is not None:
                sampler.set_epoch(state["epoch"])
            state["it"] = iter(dl)
            return next(state["it"])

    def one(sync: bool) -> tuple[float, float, float, float]:
        t0 = timer.now()
        x, y = next_batch()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        t1 = timer.now()
        ctx = model.no_sync() if (world > 1 and not sync) else _null()
        with ctx:
            loss = loss_fn(model(x), y)
            t2 = timer.now()
            loss.backward()
            t3 = timer.now()
        if sync:
            opt.step()
        opt.zero_grad(set_to_none=True)
        t4 = timer.now() if sync else t3
        return t1 - t0, t2 - t1, t3 - t2, t4 - t3

    model.train()
    for _ in range(cfg.warmup):
        one(True)
    full = [one(True) for _ in range(cfg.steps)]
    accum = [one(False) for _ in range(cfg.steps)]
    step = [sum(p) for p in full]
    acc = [sum(p) for p in accum]
    med = statistics.median
    return dict(step=med(step), accum=med(acc), std=statistics.pstdev(step), data=med(p[0] for p in full),
                forward=med(p[1] for p in full), backward=med(p[2] for p in full), update=med(p[3] for p in full))


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _row(name, batch, world, t: dict, cfg: CollectConfig, gpu_type: str, server: str) -> dict:
    return dict(model=name, gpu_type=gpu_type, server_id=server, source=f"collect:{server}", n_gpus=world,
                n_nodes=1, placement=[world], local_bsz=batch, step_time_s=t["step"],
                sync_time_s=min(max(t["step"] - t["accum"], 0.0), t["step"]), data_time_s=t["data"],
                forward_s=t["forward"], backward_s=t["backward"], update_s=t["update"],
                step_time_std_s=t["std"], repeats=cfg.steps)


def _is_oom(exc: BaseException, torch) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", ())
    return (oom and isinstance(exc, oom)) or "out of memory" in str(exc).lower()


def _grid(cfg: CollectConfig, torch, device, rank: int, world: int, gpu_type: str, server: str,
          reduce_max=None, log=None) -> list[dict]:
    rows = []
    for name in cfg.models:
        for batch in sorted(cfg.batch_sizes):
            try:
                t = _measure(name, batch, cfg, torch, device, rank, world)
            except RuntimeError as exc:
                if _is_oom(exc, torch) and world == 1:
                    warnings.warn(CalibrationWarning(f"{name} on {gpu_type}: batch {batch} does not fit in memory; "
                                                     f"larger batches skipped"), stacklevel=2)
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                    break
                raise
            if reduce_max is not None:
                t = reduce_max(t)
            if rank == 0:
                rows.append(_row(name, batch, world, t, cfg, gpu_type, server))
                if log:
                    log(f"{name:12s} K={world:<3d} b={batch:<5d} step {t['step'] * 1e3:8.2f} ms  "
                        f"sync {max(t['step'] - t['accum'], 0) * 1e3:7.2f} ms")
    return rows


def _device_name(torch, device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def _worker(rank: int, world: int, cfg_dict: dict, port: int, out_path: str, gpu_type: str, server: str) -> None:
    torch = require_torch()
    import torch.distributed as dist
    cfg = CollectConfig(**{**cfg_dict, "models": tuple(cfg_dict["models"]),
                           "batch_sizes": tuple(cfg_dict["batch_sizes"]), "gpus": tuple(cfg_dict["gpus"])})
    cuda = cfg.device == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        torch.set_num_threads(cfg.threads or 1)
        device = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    keys = ("step", "accum", "std", "data", "forward", "backward", "update")

    def reduce_max(t: dict) -> dict:
        v = torch.tensor([t[k] for k in keys], dtype=torch.float64, device=device)
        dist.all_reduce(v, op=dist.ReduceOp.MAX)
        return dict(zip(keys, v.tolist()))
    try:
        rows = _grid(cfg, torch, device, rank, world, gpu_type, server, reduce_max)
        if rank == 0:
            Path(out_path).write_text(json.dumps(rows))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _set_threads(cfg: CollectConfig, torch) -> None:
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    elif cfg.device == "cpu":
        torch.set_num_threads(1)          # steady CPU timings; one process per "device"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def collect(cfg: CollectConfig | None = None, *, log=None) -> pa.Table:
    """Run the measurement grid; returns a validated measurement table."""
    torch = require_torch()
    cfg = cfg or default_config()
    cfg.validate()
    if cfg.device == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("device 'cuda' requested but torch sees no CUDA device")
        n = torch.cuda.device_count()
        if max(cfg.gpus) > n:
            raise ConfigError(f"{max(cfg.gpus)} GPUs requested but {n} visible")
    device = torch.device("cuda", 0) if cfg.device == "cuda" else torch.device("cpu")
    _set_threads(cfg, torch)
    gpu_type = cfg.gpu_type or (gpu_type_name(_device_name(torch, device)) if cfg.device == "cuda" else "cpu")
    server = cfg.server_id or socket.gethostname()
    rows: list[dict] = []
    for world in sorted(set(cfg.gpus)):
        if world == 1:
            rows += _grid(cfg, torch, device, 0, 1, gpu_type, server, log=log)
            continue
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.json")
            d = asdict(cfg)
            mp.spawn(_worker, args=(world, d, _free_port(), out, gpu_type, server), nprocs=world, join=True)
            part = json.loads(Path(out).read_text())
        for r in part:
            if log:
                log(f"{r['model']:12s} K={world:<3d} b={r['local_bsz']:<5d} step {r['step_time_s'] * 1e3:8.2f} ms  "
                    f"sync {r['sync_time_s'] * 1e3:7.2f} ms")
        rows += part
    return measurements_from_rows(rows, source="collect")


def learning_curves(cfg: CollectConfig | None = None, *, epochs: int = 3, batch_size: int = 64,
                    log=None) -> pa.Table:
    """Train each model on one device for ``epochs`` epochs; one row per epoch (validation accuracy,
    mean normalized entropy of the validation logits)."""
    torch = require_torch()
    from ..entropy import normalized_entropy
    cfg = cfg or default_config()
    cfg.validate()
    device = torch.device("cuda", 0) if cfg.device == "cuda" else torch.device("cpu")
    _set_threads(cfg, torch)
    rows = []
    for name in cfg.models:
        torch.manual_seed(cfg.seed)
        model = build_model(name, torch).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        ds = make_dataset(name, cfg.dataset_size + cfg.dataset_size // 4, torch, cfg.seed)
        train = torch.utils.data.Subset(ds, range(cfg.dataset_size))
        val = torch.utils.data.Subset(ds, range(cfg.dataset_size, len(ds)))
        dl = _loader(train, batch_size, 0, torch, cfg.seed, device.type == "cuda")
        vl = torch.utils.data.DataLoader(val, batch_size=256)
        steps = 0
        for epoch in range(epochs):
            model.train()
            for x, y in dl:
                x, y = x.to(device), y.to(device)
                opt.zero_grad(set_to_none=True)
                loss_fn(model(x), y).backward()
                opt.step()
                steps += 1
            model.eval()
            correct, n, logits = 0, 0, []
            with torch.no_grad():
                for x, y in vl:
                    z = model(x.to(device)).float().cpu()
                    logits.append(z)
                    correct += int((z.argmax(1) == y).sum())
                    n += y.numel()
            h = normalized_entropy(torch.cat(logits).numpy())
            rows.append(dict(model=name, batch_size=batch_size, epoch=epoch, samples_seen=float(steps * batch_size),
                             metric=correct / max(n, 1), metric_name="accuracy", mean_entropy=float(h.mean()),
                             iteration=steps, source=f"collect:{cfg.server_id or socket.gethostname()}"))
            if log:
                log(f"{name:12s} epoch {epoch}: accuracy {correct / max(n, 1):.3f}, mean entropy {h.mean():.3f}")
    return learning_curves_from_rows(rows, source="collect")


def trace_info(cfg: CollectConfig, argv: Sequence[str] | None = None) -> dict:
    """Hardware, date and software versions of this machine, for the Parquet metadata and README."""
    torch = require_torch()
    info = dict(date_utc=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
                host=socket.gethostname(), python=platform.python_version(), platform=platform.platform(),
                torch=torch.__version__, cuda=torch.version.cuda, device=cfg.device, config=asdict(cfg),
                command=" ".join(argv) if argv is not None else " ".join(sys.argv))
    try:
        from importlib.metadata import version
        info["clustersim"] = version("clustersim")
    except Exception:                      # not installed as a distribution
        info["clustersim"] = None
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["cpu"] = cpu
    info["cpu_count"] = os.cpu_count()
    if cfg.device == "cuda" and torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cudnn"] = torch.backends.cudnn.version()
        try:
            v = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)
        except Exception:                  # NCCL not built in
            info["nccl"] = None
        try:
            info["driver"] = _nvidia_smi("driver_version")
        except Exception:
            info["driver"] = None
    return info


def _nvidia_smi(field_name: str) -> str | None:
    import subprocess
    out = subprocess.run(["nvidia-smi", f"--query-gpu={field_name}", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=20)
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def read_info(path) -> dict:
    """The trace information stored in a collected Parquet file."""
    return read_trace_info(path)


def run(cfg: CollectConfig, out: Path, *, lc_out: Path | None = None, epochs: int = 3, log=print,
        argv: Sequence[str] | None = None) -> tuple[pa.Table, pa.Table | None]:
    """Collect, then write ``out`` (and ``lc_out``) with :func:`trace_info` in the metadata."""
    info = trace_info(cfg, argv)
    table = collect(cfg, log=log)
    write_measurements(table, out, trace_info=info, source=str(out))
    lc = None
    if lc_out is not None:
        lc = learning_curves(cfg, epochs=epochs, batch_size=max(min(cfg.batch_sizes), 8), log=log)
        write_learning_curves(lc, lc_out, trace_info=info, source=str(lc_out))
    return table, lc
