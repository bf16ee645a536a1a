"""Calibration against real GPU measurements (docs/calibration.md).

* :mod:`.schema`     the measurement and learning-curve tables (Arrow / Parquet) and their checks
* :mod:`.importers`  Gavel throughput JSON, Pollux and Sia profile CSVs -> measurements
* :mod:`.collector`  ``clustersim collect``: real training steps with PyTorch (optional extra)
* :mod:`.observations` measurements of one (model, GPU type) as arrays
* :mod:`.models`     Pollux/Sia and Hops step-time models (parameter sets, vectorized step times)
* :mod:`.fit`        fitting those models by nonlinear least squares, with identifiability checks
* :mod:`.oracle`     calib.toml and :class:`CalibratedThroughput`, a throughput oracle for ``simulate``
* :mod:`.report`     hold-out validation: fit on some placements and batch sizes, predict the rest

Nothing here imports torch; only :mod:`.collector` needs it, when it runs.
"""
import importlib

_EXPORTS = {
    "fit": ("FitResult", "fit_all", "fit_hops", "fit_pollux"),
    "models": ("KINDS", "HopsParams", "PolluxParams"),
    "observations": ("Observations", "group_observations"),
    "importers": ("import_gavel", "import_path", "import_paths", "import_pollux_learning_curves",
                  "import_pollux_profile", "import_sia_profile", "import_sia_seed"),
    "oracle": ("CalibratedThroughput", "read_calibration", "write_calibration"),
    "schema": ("LEARNING_CURVE_SCHEMA", "MEASUREMENT_SCHEMA", "CalibrationWarning", "learning_curves_from_rows",
               "measurements_from_rows", "read_learning_curves", "read_measurements", "validate_learning_curves",
               "validate_measurements", "write_learning_curves", "write_measurements"),
}
_WHERE = {name: mod for mod, names in _EXPORTS.items() for name in names}


def __getattr__(name: str):
    """Import submodules on first use (scipy and the simulator core load only when needed)."""
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


__all__ = [
    "KINDS", "FitResult", "HopsParams", "Observations", "PolluxParams", "fit_all", "fit_hops",
    "fit_pollux", "group_observations", "import_gavel", "import_path", "import_paths",
    "import_pollux_learning_curves", "import_pollux_profile", "import_sia_profile", "import_sia_seed",
    "CalibratedThroughput", "read_calibration", "write_calibration", "LEARNING_CURVE_SCHEMA",
    "MEASUREMENT_SCHEMA", "CalibrationWarning", "learning_curves_from_rows", "measurements_from_rows",
    "read_learning_curves", "read_measurements", "validate_learning_curves", "validate_measurements",
    "write_learning_curves", "write_measurements",
]
