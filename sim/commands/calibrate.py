"""``clustersim calibrate``: fit step-time models to measurements, write calib.toml, print the errors."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

from . import help_line


def register(sub) -> None:
    p = sub.add_parser("calibrate", help=help_line("calibrate"),
                       description="MEASUREMENTS: measurement Parquet/CSV files, Gavel throughput JSON, "
                                   "Pollux/Sia profile directories (a model's, or a folder of them), or Sia "
                                   "seed CSVs. Prints each fit's step-time error (in-sample; with --holdout "
                                   "also fitting on some placements and batch sizes and predicting the others).")
    p.add_argument("measurements", nargs="+", type=Path, metavar="MEASUREMENTS")
    p.add_argument("-o", "--out", type=Path, required=True, help="calib.toml to write")
    p.add_argument("--kind", default="pollux,hops", help="models to fit: pollux, hops or both (default)")
    p.add_argument("--holdout", action="store_true", help="also report hold-out errors")
    p.add_argument("--save-measurements", type=Path, default=None,
                   help="also write the imported measurements as one Parquet file")
    p.add_argument("--quiet", action="store_true", help="do not print identifiability warnings")
    p.set_defaults(func=_calibrate)


def _calibrate(args) -> None:
    from ..calibration.fit import fit_all
    from ..calibration.importers import import_paths
    from ..calibration.oracle import write_calibration
    from ..calibration.report import markdown_table, validate
    from ..calibration.schema import CalibrationWarning, write_measurements
    from ..errors import ConfigError

    kinds = tuple(k.strip() for k in args.kind.split(",") if k.strip())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        table = import_paths(args.measurements)
    if table.num_rows == 0:
        raise ConfigError("no measurements in " + ", ".join(map(str, args.measurements)))
    if args.save_measurements:
        write_measurements(table, args.save_measurements)
        print(f"wrote {table.num_rows} measurements to {args.save_measurements}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        fits = fit_all(table, kinds, emit_warnings=False)
    write_calibration(list(fits.values()), args.out, sources=[str(p) for p in args.measurements])
    notes = [str(w.message) for w in caught if issubclass(w.category, CalibrationWarning)]
    for f in fits.values():
        notes += f.warnings
    if notes and not args.quiet:
        for n in notes:
            print(f"warning: {n}", file=sys.stderr)
    print(f"{'model':28s} {'GPU type':14s} {'kind':7s} {'points':>7s} {'median APE %':>13s} {'p90 APE %':>10s}")
    for (m, g, k), f in sorted(fits.items()):
        print(f"{m:28s} {g:14s} {k:7s} {f.n_points:7d} {f.median_ape:13.1f} {f.p90_ape:10.1f}")
    if args.holdout:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibrationWarning)
            _, summary, _ = validate(table, kinds)
        print("\nhold-out step-time error, percent (median / p90; ✗: held-out placements median > 10%):")
        print(markdown_table(summary, kinds))
    print(f"wrote {len(fits)} fits to {args.out}")
