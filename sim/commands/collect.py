"""``clustersim collect``: measure real training steps with PyTorch (optional extra) -> Parquet."""
from __future__ import annotations

from pathlib import Path

from . import help_line


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def register(sub) -> None:
    p = sub.add_parser("collect", help=help_line("collect"),
                       description="Time forward, backward, update, synchronisation and data loading of "
                                   "an MLP, a small CNN and a small transformer over a grid of batch sizes "
                                   "and GPU counts (torch.distributed when several GPUs are visible). "
                                   "Needs PyTorch: pip install 'clustersim[collect]'.")
    p.add_argument("-o", "--out", type=Path, required=True, help="measurement Parquet file to write")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--models", default=None, help="comma-separated subset of mlp,cnn,transformer")
    p.add_argument("--batch-sizes", default=None, help="per-GPU batch sizes, e.g. 16,32,64")
    p.add_argument("--gpus", default=None, help="GPU counts, e.g. 1,2,4,8 (default: 1, 2, 4, ... visible)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per configuration")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first")
    p.add_argument("--reduced", action="store_true", help="the small CPU grid (default on the CPU)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--threads", type=int, default=None, help="CPU threads per process")
    p.add_argument("--gpu-type", default=None, help="GPU type to record (default: from the device name)")
    p.add_argument("--server-id", default=None, help="server id to record (default: host name)")
    p.add_argument("--learning-curves", type=Path, default=None, help="also train and write learning curves here")
    p.add_argument("--epochs", type=int, default=3, help="epochs of the learning-curve runs")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_collect)


def _collect(args) -> None:
    from ..calibration import collector
    from ..errors import ConfigError

    device = None if args.device == "auto" else args.device
    cfg = collector.default_config(device, reduced=True if args.reduced else None)
    if args.models:
        cfg.models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    if args.batch_sizes:
        cfg.batch_sizes = _ints(args.batch_sizes)
    if args.gpus:
        cfg.gpus = _ints(args.gpus)
    if args.steps is not None:
        cfg.steps = args.steps
    if args.warmup is not None:
        cfg.warmup = args.warmup
    cfg.workers, cfg.threads, cfg.seed = args.workers, args.threads, args.seed
    cfg.gpu_type, cfg.server_id = args.gpu_type, args.server_id
    if args.epochs < 1:
        raise ConfigError("--epochs must be >= 1")
    table, lc = collector.run(cfg, args.out, lc_out=args.learning_curves, epochs=args.epochs,
                              argv=args.argv)
    print(f"wrote {table.num_rows} measurements to {args.out}")
    if lc is not None:
        print(f"wrote {lc.num_rows} learning-curve rows to {args.learning_curves}")
    info = collector.read_info(args.out)
    print("trace info (for the README row): " + ", ".join(
        f"{k}={info.get(k)}" for k in ("date_utc", "host", "gpus", "cpu", "torch", "cuda", "cudnn", "nccl",
                                       "driver", "python", "clustersim") if k in info))
