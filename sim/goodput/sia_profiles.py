"""Sia's per-GPU-type profiles and the constants of the Sia simulator (siasosp23/artifacts
``sia-simulator/``: ``applications.py``, ``simulator_config.py``; docs/goodput.md).

A Sia profile folder (``profiles/sia/<application>/``) holds the validation runs of Pollux's
profiles and one ``placements-<cluster>.csv`` / ``scalability-<cluster>.csv`` pair per profiled
cluster; :data:`SIA_PROFILE_SUFFIX` names the file of each GPU type.  Jobs of a Sia workload use
the reference profile (:data:`SIA_REFERENCE_SUFFIX`, the simulator's ``"aws"``) for the gradient
statistics and epochs, and each GPU type's profile for step times and the fitted throughput model
there.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import TraceError
from .profiles import Application

__all__ = ["SIA_PROFILE_SUFFIX", "SIA_REFERENCE_SUFFIX", "SIA_APPLICATION_DEFAULTS", "SIA_TYPE_DEFAULTS",
           "SIA_RESTART_S", "SIA_SLOWDOWNS", "load_sia_applications"]

#: GPU type -> the cluster suffix of its profile files (A100: ``dgx-ext``, the simulator's default
#: over ``dgx``, which has fewer batch sizes profiled)
SIA_PROFILE_SUFFIX: dict[str, str] = {"t4": "aws", "rtx2080ti": "rtx", "a100": "dgx-ext", "v100": "azure",
                                      "quadrortx6000": "quad"}

#: profile whose validation runs, batch range and epochs every job uses (``reference_app``)
SIA_REFERENCE_SUFFIX = "aws"

#: epochs per application (applications.py ``APPLICATIONS``); unlike Pollux's, no per-GPU cap on
#: yolov3's batch
SIA_APPLICATION_DEFAULTS: dict[str, dict] = {
    "bert": {"max_epochs": 2}, "cifar10": {"max_epochs": 100}, "ncf": {"max_epochs": 10},
    "imagenet": {"max_epochs": 90}, "deepspeech2": {"max_epochs": 80}, "yolov3": {"max_epochs": 50},
}

#: (application, profile suffix) -> overrides (applications.py: deepspeech2 on rtx fits 57 per GPU)
SIA_TYPE_DEFAULTS: dict[tuple[str, str], dict] = {("deepspeech2", "rtx"): {"max_local_bsz": 57}}

#: re-scale (checkpoint-restore) delay of each application, seconds (applications.py
#: ``rescale_time``); 30 for others
SIA_RESTART_S: dict[str, float] = {"cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0,
                                   "imagenet": 250.0, "ncf": 15.0}

#: the simulator's calibration (simulator_config.py ``SLOWDOWNS``): measured goodput is divided
#: by these, "real-world runs being slower than simulator"
SIA_SLOWDOWNS: dict[str, float] = {"cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2,
                                   "deepspeech2": 1.2, "ncf": 1.5, "gpt_pmp": 1.0}


def _load(root: Path, name: str, suffix: str) -> Application:
    over = {**SIA_APPLICATION_DEFAULTS.get(name, {}), **SIA_TYPE_DEFAULTS.get((name, suffix), {})}
    return Application.load(root / name, suffix=suffix, defaults={name: over})


def load_sia_applications(root, names, gpu_types=tuple(SIA_PROFILE_SUFFIX)):
    """(reference applications, {GPU type: applications}) of ``names`` under a Sia profile root;
    GPU types whose profile files are missing for any application are left out."""
    root = Path(root)
    ref = tuple(_load(root, n, SIA_REFERENCE_SUFFIX) for n in names)
    typed = {}
    for t in gpu_types:
        suffix = SIA_PROFILE_SUFFIX.get(t)
        if suffix and all((root / n / f"placements-{suffix}.csv").exists() for n in names):
            typed[t] = tuple(_load(root, n, suffix) for n in names)
    if not typed:
        raise TraceError(f"no GPU type has placements-<cluster>.csv profiles for all of {list(names)}",
                         file=str(root))
    return ref, typed
