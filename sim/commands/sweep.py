"""``clustersim sweep SPEC --out DIR``: run a grid of simulations, resumably, then plot it."""
from __future__ import annotations

import sys
from pathlib import Path

from . import help_line


def register(sub) -> None:
    p = sub.add_parser("sweep", help=help_line("sweep"),
                       description="Run every cell of a sweep spec not yet finished in DIR, append "
                                   "its summary and per-job results to DIR (Parquet, partitioned by "
                                   "cell), then write plots and DIR/index.html.  Running the same "
                                   "command again skips finished cells and retries failed ones.")
    p.add_argument("spec", type=Path, help="sweep spec (TOML), e.g. scalability/specs/smoke.toml")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes (default: CPU count; with --dask local: its workers)")
    p.add_argument("--dask", default=None, metavar="ADDR|local",
                   help="run on Dask: tcp://HOST:PORT of a scheduler, or 'local' for a LocalCluster")
    p.add_argument("--no-plots", action="store_true", help="skip plots and index.html")
    p.add_argument("--baseline", default=None, metavar="POLICY",
                   help="policy the report's ratios are taken to (default: fifo if in the sweep, "
                        "else the first policy by name)")
    p.add_argument("--plots-only", action="store_true",
                   help="run nothing; redraw plots and index.html from DIR")
    p.add_argument("--dry-run", action="store_true", help="validate and list the cells to run")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_sweep)


def _sweep(args) -> None:
    from ..errors import ConfigError
    from ..sweep.spec import load_spec
    from ..sweep.store import SweepStore

    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    spec = load_spec(args.spec)
    if args.dry_run:
        done = set()
        if (args.out / "sweep.json").exists():
            done = SweepStore.open(args.out, spec).finished_ids()
        todo = [c for c in spec.cells if c.id not in done]
        print(f"sweep {spec.name}: {len(spec.cells)} cells ({len(spec.policies)} policies: "
              f"{', '.join(spec.policies)}), {len(todo)} to run")
        for c in todo:
            print(f"  {c.id}  {c.label}")
        return
    if not args.plots_only:
        from ..sweep.runners import run_sweep
        report = run_sweep(spec, args.out, workers=args.workers, dask=args.dask,
                           progress=not args.no_progress)
        print(report.line())
        for label, err in report.failures[:20]:
            print(f"  failed: {label}: {err}")
    else:
        SweepStore.open(args.out, spec)
    if not args.no_plots:
        from ..sweep.plots import write_sweep_plots
        index = write_sweep_plots(args.out, [c.id for c in spec.cells], baseline=args.baseline)
        print(f"plots: {index}")
    if not args.plots_only and report.failed:
        print(f"{report.failed} cells failed; see {args.out}/failed/ (rerun to retry them)",
              file=sys.stderr)
        sys.exit(1)
