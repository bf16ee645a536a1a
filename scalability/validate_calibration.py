"""Hold-out validation of the calibrated step-time models on the real Pollux and Sia profiles.

For every (model, GPU type) of ../shared/data/profiles (Pollux: T4; Sia: V100 = azure, A100 = dgx and
dgx-ext, Quadro RTX 6000 = quad, RTX 2080 Ti = rtx; Sia's aws files are the Pollux files again and
are skipped, as is the pipeline-parallel gpt_pmp), fit the Pollux/Sia and the Hops models on the
kept placements and batch sizes and predict the held-out ones (sim.calibration.report).  Writes

    OUT/calibration_errors.parquet      one row per measurement and model kind (prediction, APE, split)
    OUT/calibration_summary.parquet     median / p90 APE per (model, GPU type, kind)
    OUT/calibration_diagnostics.parquet data-only lower bounds that explain misses
    OUT/calibration_pred_vs_meas.png    predicted vs measured step time, held-out rows
    OUT/calibration_table.md            the tables of docs/calibration.md

Sources: Pollux (Qiao et al., OSDI'21; petuum/adaptdl, Apache-2.0) and Sia (Jayaram Subramanya et
al., SOSP'23; siasosp23/artifacts, no license: read at run time, never copied).

    python scalability/validate_calibration.py [--data ../shared/data] [--out out/calibration]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # small dense fits: one BLAS thread is fastest

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.calibration.importers import import_pollux_profile, import_sia_profile, sia_clusters  # noqa: E402
from sim.calibration.report import (diagnostics_table, markdown_table, misses_table,  # noqa: E402
                                    plot_predicted_vs_measured, validate)
from sim.calibration.schema import CalibrationWarning  # noqa: E402

#: Sia clusters left out: aws repeats the Pollux files.
SKIP_SIA_CLUSTERS = ("aws",)


def default_data() -> Path:
    env = os.environ.get("CLUSTERSIM_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def load_profiles(data: Path, models: list[str] | None = None) -> pa.Table:
    """Measurements of every (model, GPU type) used by the validation."""
    prof = data / "profiles"
    parts = []
    for d in sorted((prof / "pollux").iterdir()):
        if d.is_dir() and (models is None or d.name in models):
            parts.append(import_pollux_profile(d))
    for d in sorted((prof / "sia").iterdir()):
        if not d.is_dir() or d.name == "gpt_pmp" or (models is not None and d.name not in models):
            continue
        for c in sia_clusters(d):
            if c not in SKIP_SIA_CLUSTERS:
                parts.append(import_sia_profile(d, c))
    return pa.concat_tables(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=default_data())
    ap.add_argument("--out", type=Path, default=Path("out/calibration"))
    ap.add_argument("--models", default=None, help="comma-separated subset")
    ap.add_argument("--every", type=int, default=3, help="hold out every n-th placement / batch size")
    args = ap.parse_args(argv)
    if not (args.data / "profiles").is_dir():
        print(f"no profiles under {args.data} (set --data or CLUSTERSIM_SHARED_DATA)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        table = load_profiles(args.data, args.models.split(",") if args.models else None)
        errors, summary, notes = validate(table, every=args.every)
    diag = diagnostics_table(table)
    args.out.mkdir(parents=True, exist_ok=True)
    pq.write_table(errors, args.out / "calibration_errors.parquet", compression="zstd")
    pq.write_table(summary, args.out / "calibration_summary.parquet", compression="zstd")
    pq.write_table(diag, args.out / "calibration_diagnostics.parquet", compression="zstd")
    plot_predicted_vs_measured(errors, args.out / "calibration_pred_vs_meas.png")
    text = ("## Hold-out step-time error (percent, median / p90)\n\n" + markdown_table(summary)
            + "\n\n## Misses (held-out placements median > 10%) and data diagnostics\n\n"
            + misses_table(summary, diag) + "\n")
    (args.out / "calibration_table.md").write_text(text)
    print(text)
    ok = sum(r["meets_target"] is True for r in summary.to_pylist())
    print(f"{table.num_rows} measurements, {summary.num_rows} fits; {ok} meet the 10% target; "
          f"{time.perf_counter() - t0:.1f} s; wrote {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
