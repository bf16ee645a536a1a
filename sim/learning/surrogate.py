"""Parametric learning-curve surrogate, fitted to the real Pollux validation curves.

Data (read only at fit time): ``profiles/pollux/<model>/validation-<batch>.csv`` of the
shared data folder (petuum/adaptdl ``simulator/traces``; Qiao et al., "Pollux", OSDI'21):
a validation metric against Pollux's ``progress`` (reference-batch steps weighted by
statistical efficiency) at several batch sizes, with gradient statistics; and
``placements.csv`` (step and synchronisation time by placement and per-GPU batch).
``python -m sim.learning.surrogate --fit [DATA_DIR]`` refits and rewrites
``sim/data/learning_surrogate.json``, which holds only fitted parameters and provenance.

Per model profile we fit [I: the forms are ours, the constants are fitted]:

* **learning curve**, pooled over batch sizes (Pollux's premise: metric against progress
  does not depend on the batch)::

      m(P) = m_inf + (m_0 - m_inf) * exp(-(P / tau) ** kappa)

  For a job that must reach a fraction ``q`` of the achievable improvement
  (target ``m* = m_inf + (m_0 - m_inf) * (1 - q)``), the progress needed is
  ``P_q = tau * (-ln(1 - q)) ** (1 / kappa)``; in the job's normalized progress
  ``x = P / P_q`` the remaining gap is ``gap(x) = (1 - q) ** (x ** kappa)``: ``tau`` drops
  out and the shape is ``kappa`` alone.  The entropy surrogate follows this gap
  (:mod:`sim.learning.dynamics`).
* **gradient noise scale**, ``phi(P) = phi0 + phi_slope * P / P_end`` (samples),
  fitted to the efficiency the runs realized at each batch size (``source="efficiency"``,
  the default) and, for comparison, to the gradient statistics of the smallest-batch run
  (``phi0_gns``, ``phi_slope_gns``);
* **step time**, ``t(b) = alpha_c + beta_c * b`` per GPU (single-GPU placements) and a
  synchronisation time ``sync_intra`` (several GPUs on one node) / ``sync_inter`` (several
  nodes): the median of ``step_time - t(b)`` over those placements, clipped at 0;
* **epoch**: ``epoch_samples = progress of the first checkpoint * M0`` (the runs validate
  once per epoch).

Models of the throughput table map to profiles by family (:data:`PROFILE_FOR_FAMILY`, our
choice [I]); unknown models get :data:`DEFAULT_PROFILE`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from ..throughput import model_family

__all__ = ["Profile", "LearningSurrogate", "load_surrogate", "profile_for_model",
           "PROFILE_FOR_FAMILY", "DEFAULT_PROFILE", "fit_pollux", "SURROGATE_FILE"]

SURROGATE_FILE = "data/learning_surrogate.json"

#: Throughput-table model family -> Pollux profile [I].  Gavel's ResNet-18 trains on CIFAR-10
#: and its ResNet-50 on ImageNet (throughput.GAVEL_MODEL_FAMILY); the others are our pick of
#: the closest measured task: Transformer -> BERT, LM (an LSTM) -> DeepSpeech2 (recurrent),
#: Recommendation -> NCF, CycleGAN (vision) -> YOLOv3, A3C -> CIFAR-10 (no RL profile exists).
PROFILE_FOR_FAMILY: dict[str, str] = {
    "resnet-18": "cifar10",
    "resnet-50": "imagenet",
    "transformer": "bert",
    "lm": "deepspeech2",
    "recommendation": "ncf",
    "cyclegan": "yolov3",
    "a3c": "cifar10",
}
#: Profile of models with no mapping (e.g. the test oracle's "m0", "m1").
DEFAULT_PROFILE = "cifar10"


@dataclass(frozen=True)
class Profile:
    """Fitted parameters of one model profile (see the module docstring)."""

    name: str
    metric: str               # "accuracy" (higher is better) or "error" (lower is better)
    higher_is_better: bool
    m0: float
    m_inf: float
    tau: float                # progress units (reference-batch steps)
    kappa: float
    p_end: float              # progress at the last checkpoint of the data
    ref_batch: int            # M0: the smallest batch the runs used
    epoch_samples: float
    phi0: float               # samples
    phi_slope: float
    phi0_gns: float
    phi_slope_gns: float
    alpha_c: float            # s per step
    beta_c: float             # s per sample per GPU
    sync_intra: float         # s
    sync_inter: float         # s
    curve_rmse: float         # rmse of the normalized metric (metric / |m_inf - m_0|)
    eff_rmse: float           # rmse of log EFF
    n_points: int
    low_data: bool

    def metric_at(self, progress) -> np.ndarray:
        """The fitted validation metric at progress ``P`` (reference-batch steps)."""
        P = np.maximum(np.asarray(progress, float), 0.0)
        return self.m_inf + (self.m0 - self.m_inf) * np.exp(-(P / self.tau) ** self.kappa)

    def progress_for_quality(self, q) -> np.ndarray:
        """``P_q``: progress at which the fitted curve closes a fraction ``q`` of its gap."""
        q = np.asarray(q, float)
        if np.any((q <= 0) | (q >= 1)):
            raise ConfigError(f"profile {self.name}: quality q must be in (0, 1)")
        return self.tau * (-np.log1p(-q)) ** (1.0 / self.kappa)

    def target_metric(self, q) -> np.ndarray:
        """``m* = m_inf + (m_0 - m_inf) (1 - q)``: the metric a job of quality ``q`` must reach."""
        return self.m_inf + (self.m0 - self.m_inf) * (1.0 - np.asarray(q, float))


class LearningSurrogate:
    """The fitted profiles, indexed by name; ``arrays()`` gives them as numpy columns."""

    def __init__(self, profiles: Sequence[Profile], provenance: Mapping | None = None):
        if not profiles:
            raise ConfigError("learning surrogate has no profiles")
        self.profiles: tuple[Profile, ...] = tuple(profiles)
        self.names: tuple[str, ...] = tuple(p.name for p in self.profiles)
        self._index = {n: i for i, n in enumerate(self.names)}
        self.provenance = dict(provenance or {})
        if DEFAULT_PROFILE not in self._index:
            raise ConfigError(f"learning surrogate lacks the default profile {DEFAULT_PROFILE!r}")

    def __len__(self) -> int:
        return len(self.profiles)

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise ConfigError(f"unknown learning profile {name!r}; known: {', '.join(self.names)}") from None

    def __getitem__(self, name: str) -> Profile:
        return self.profiles[self.index(name)]

    def profile_indices(self, model_names: Sequence[str]) -> np.ndarray:
        """Profile index of each model name (family mapping, then the default)."""
        return np.array([self.index(profile_for_model(m, self.names)) for m in model_names],
                        dtype=np.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        """Each numeric field as a float64 array over profiles."""
        out = {}
        for f in fields(Profile):
            if f.name in ("name", "metric"):
                continue
            out[f.name] = np.array([float(getattr(p, f.name)) for p in self.profiles])
        return out

    def with_overrides(self, **scale) -> "LearningSurrogate":
        """A copy with numeric fields multiplied: ``with_overrides(kappa=2.0, phi0=0.5)``
        (for the sensitivity analysis)."""
        names = {f.name for f in fields(Profile)}
        bad = [k for k in scale if k not in names or k in ("name", "metric", "higher_is_better")]
        if bad:
            raise ConfigError(f"cannot scale surrogate field(s) {bad}")
        profs = [Profile(**{**asdict(p), **{k: getattr(p, k) * float(v) for k, v in scale.items()}})
                 for p in self.profiles]
        return LearningSurrogate(profs, {**self.provenance, "overrides": dict(scale)})

    def to_json(self) -> dict:
        return {"format": "clustersim.learning_surrogate/1", "provenance": self.provenance,
                "profiles": [asdict(p) for p in self.profiles]}

    @classmethod
    def from_json(cls, doc: Mapping, source: str = "<memory>") -> "LearningSurrogate":
        if not isinstance(doc, Mapping) or doc.get("format") != "clustersim.learning_surrogate/1":
            raise ConfigError(f"{source}: not a learning surrogate file")
        names = {f.name for f in fields(Profile)}
        profs = []
        for i, p in enumerate(doc.get("profiles", [])):
            missing = names - set(p)
            if missing:
                raise ConfigError(f"{source}: profile {i} lacks {sorted(missing)}")
            profs.append(Profile(**{k: p[k] for k in names}))
        return cls(profs, doc.get("provenance", {}))


def profile_for_model(model: str, known: Sequence[str]) -> str:
    """The profile of a throughput-table model name: itself if it is a profile name, else its
    family's mapping (:data:`PROFILE_FOR_FAMILY`), else :data:`DEFAULT_PROFILE`."""
    low = str(model).lower()
    if low in known:
        return low
    fam = model_family(str(model))
    prof = PROFILE_FOR_FAMILY.get(fam)
    return prof if prof in known else DEFAULT_PROFILE


@lru_cache(maxsize=1)
def _builtin() -> LearningSurrogate:
    with resources.files("sim").joinpath(SURROGATE_FILE).open("r") as f:
        return LearningSurrogate.from_json(json.load(f), f"<builtin: sim/{SURROGATE_FILE}>")


def load_surrogate(path=None) -> LearningSurrogate:
    """The built-in fitted surrogate, or one from a JSON file written by :func:`fit_pollux`."""
    if path is None:
        return _builtin()
    p = Path(path)
    try:
        with open(p) as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"learning surrogate {p} not found") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"learning surrogate {p}: invalid JSON: {exc}") from None
    return LearningSurrogate.from_json(doc, str(p))


# --------------------------------------------------------------------------- fitting

def _read_csv(path: Path) -> dict[str, np.ndarray]:
    import pyarrow.csv as pacsv
    t = pacsv.read_csv(path)
    return {c: t.column(c).to_numpy().astype(float) if c != "placement" else
            np.array([str(v) for v in t.column(c).to_pylist()]) for c in t.column_names}


#: Metric of an untrained model (the curve's value at P = 0), our prior [I]: chance accuracy
#: for classification (CIFAR-10: 10 classes, ImageNet: 1000), a 100% word error rate for
#: DeepSpeech2, hit rate 10/101 for NCF (HR@10 against 100 sampled negatives), F1 = 0 for
#: BERT.  Profiles without a prior fit m0 within [first, first + 3 * span] of their data.
M0_PRIOR: dict[str, float] = {"cifar10": 0.1, "imagenet": 0.001, "deepspeech2": 100.0,
                              "ncf": 10.0 / 101.0, "bert": 0.0}


def _fit_curve(P: np.ndarray, m: np.ndarray, higher: bool, low_data: bool, m0_prior):
    """Fit m(P) = m_inf + (m0 - m_inf) exp(-(P/tau)^kappa); returns (m0, m_inf, tau, kappa, rmse).

    kappa is bounded to [0.3, 3] (fixed at 1 with too few checkpoints); m0 is the prior when
    given; the asymptote m_inf lies within 10% of the data's span beyond the best value seen
    (a full training run ends close to its plateau)."""
    from scipy.optimize import least_squares

    span = max(float(np.ptp(m)), 1e-9)
    order = np.argsort(P)
    first, last = float(m[order[0]]), float(m[order[-1]])
    Pmax = float(P.max())
    sgn = -1.0 if higher else 1.0

    def model(m0, minf, ltau, lk, PP):
        return minf + (m0 - minf) * np.exp(-(PP / np.exp(ltau)) ** np.exp(lk))

    free_m0 = m0_prior is None
    lk_lo, lk_hi = (np.log(0.3), np.log(3.0)) if not low_data else (-1e-9, 1e-9)

    def unpack(t):
        m0 = t[3] if free_m0 else float(m0_prior)
        return m0, t[0], t[1], t[2]

    def resid(t):
        return (model(*unpack(t), P) - m) / span
    best_seen = float(m.max() if higher else m.min())
    lo = [best_seen - (0.1 * span if not higher else 0.0), np.log(Pmax) - 15, lk_lo]
    hi = [best_seen + (0.1 * span if higher else 0.0), np.log(Pmax) + 5, lk_hi]
    if free_m0:
        a, b = sorted([first, first + sgn * 3 * span])
        lo.append(a)
        hi.append(b)
    best = None
    for lt in (np.log(Pmax / 50), np.log(Pmax / 10), np.log(Pmax / 3)):
        for lk in ((0.0,) if low_data else (np.log(0.5), 0.0, np.log(1.5))):
            x0 = [best_seen + 0.05 * span * (1 if higher else -1), lt, lk] + ([first + sgn * 0.5 * span] if free_m0 else [])
            r = least_squares(resid, x0, bounds=(lo, hi))
            if best is None or r.cost < best.cost:
                best = r
    m0, minf, ltau, lk = unpack(best.x)
    rmse = float(np.sqrt(np.mean(resid(best.x) ** 2)))
    return float(m0), float(minf), float(np.exp(ltau)), float(np.exp(lk)), rmse


def _fit_steps(placements: dict[str, np.ndarray]) -> tuple[float, float, float, float]:
    pl, b, st = placements["placement"], placements["local_bsz"], placements["step_time"]
    single = pl == "1"
    A = np.vstack([np.ones(single.sum()), b[single]]).T
    (alpha, beta), *_ = np.linalg.lstsq(A, st[single], rcond=None)
    alpha, beta = max(float(alpha), 0.0), max(float(beta), 1e-12)
    resid = st - (alpha + beta * b)
    nodes = np.array([len(p) for p in pl])
    gpus = np.array([sum(int(c) for c in p) for p in pl])
    intra = (nodes == 1) & (gpus > 1)
    inter = nodes > 1
    s_intra = float(np.clip(np.median(resid[intra]), 0, None)) if intra.any() else 0.0
    s_inter = float(np.clip(np.median(resid[inter]), 0, None)) if inter.any() else s_intra
    return alpha, beta, s_intra, max(s_inter, s_intra)


def fit_pollux(root, models: Sequence[str] | None = None) -> LearningSurrogate:
    """Fit every model directory under ``root`` (= ``.../profiles/pollux``), or only
    ``models`` (the default profile is always included)."""
    from .stats_efficiency import fit_phi_linear, fit_phi_loglinear, noise_scale, realized_efficiency

    root = Path(root)
    dirs = sorted(d for d in root.iterdir() if d.is_dir() and any(d.glob("validation-*.csv")))
    if models is not None:
        keep = set(models) | {DEFAULT_PROFILE}
        dirs = [d for d in dirs if d.name in keep]
    if not dirs:
        raise ConfigError(f"no Pollux profiles under {root}")
    profiles = []
    for d in dirs:
        runs = []
        for f in d.glob("validation-*.csv"):
            B = int(f.stem.split("-")[1])
            data = _read_csv(f)
            # dedupe repeated rows (some upstream files repeat their checkpoints)
            _, keep = np.unique(data["progress"], return_index=True)
            runs.append((B, {k: v[np.sort(keep)] for k, v in data.items()}))
        runs.sort(key=lambda r: r[0])
        M0 = runs[0][0]
        P = np.concatenate([r["progress"] for _, r in runs])
        m = np.concatenate([r["metric"] for _, r in runs])
        p_end = float(max(r["progress"].max() for _, r in runs))
        base = runs[0][1]
        higher = bool(base["metric"][-1] > base["metric"][0])
        low_data = len(np.unique(np.round(P / p_end, 2))) < 5
        m0, minf, tau, kappa, curve_rmse = _fit_curve(P, m, higher, low_data, M0_PRIOR.get(d.name))
        # statistical efficiency realized by the larger-batch runs
        fr, ef, bb = [], [], []
        for B, r in runs[1:]:
            mid, e = realized_efficiency(r["progress"], r["iteration"], B, M0)
            fr.append(mid / p_end)
            ef.append(e)
            bb.append(np.full(mid.size, float(B)))
        if fr:
            phi0, g, eff_rmse = fit_phi_linear(np.concatenate(fr), np.concatenate(ef),
                                               np.concatenate(bb), M0)
        else:
            phi0, g, eff_rmse = 1e9, 0.0, float("nan")
        gns = noise_scale(base["grad_sqr"], base["grad_var"], M0)
        phi0_gns, g_gns, _ = fit_phi_loglinear(base["progress"] / p_end, gns)
        alpha, beta, s_intra, s_inter = _fit_steps(_read_csv(d / "placements.csv"))
        profiles.append(Profile(
            name=d.name, metric="accuracy" if higher else "error", higher_is_better=higher,
            m0=m0, m_inf=minf, tau=tau, kappa=kappa, p_end=p_end, ref_batch=int(M0),
            epoch_samples=float(base["progress"].min() * M0), phi0=phi0, phi_slope=g,
            phi0_gns=phi0_gns, phi_slope_gns=g_gns, alpha_c=alpha, beta_c=beta,
            sync_intra=s_intra, sync_inter=s_inter, curve_rmse=curve_rmse,
            eff_rmse=eff_rmse, n_points=int(P.size), low_data=low_data))
    prov = {
        "source": "petuum/adaptdl simulator/traces/<model>/ (Apache-2.0), as copied to "
                  "shared/data/profiles/pollux: validation-<batch>.csv and placements.csv",
        "cite": "Qiao et al., Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep "
                "Learning, OSDI'21",
        "fit": "python -m sim.learning.surrogate --fit <data>/profiles/pollux",
        "forms": {
            "curve": "m(P) = m_inf + (m0 - m_inf) * exp(-(P/tau)^kappa), pooled over batch sizes",
            "phi": "phi(P) = phi0 + phi_slope * P / p_end; fitted to realized efficiency "
                   "dP*M0/(dIter*B) of the runs with B > M0 (phi0_gns/phi_slope_gns: to "
                   "M0*grad_var/grad_sqr of the M0 run)",
            "step": "t(b) = alpha_c + beta_c * b (placement '1'); sync = median(step_time - t(b)) "
                    "over one-node multi-GPU (intra) / multi-node (inter) placements",
        },
        "notes": "bert has 2 checkpoints per run: kappa fixed at 1 and m0 at 0 (low_data)",
    }
    return LearningSurrogate(profiles, prov)


def _default_data_dir() -> Path:
    env = os.environ.get("CLUSTERSIM_SHARED_DATA")
    base = Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "data"
    return base / "profiles" / "pollux"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Fit the learning-curve surrogate to Pollux's curves")
    ap.add_argument("--fit", nargs="?", const="", default=None, metavar="POLLUX_DIR")
    ap.add_argument("--out", default=None, help="JSON to write (default: the built-in file)")
    args = ap.parse_args(argv)
    if args.fit is None:
        s = load_surrogate()
        for p in s.profiles:
            print(f"{p.name:12s} kappa={p.kappa:.2f} tau={p.tau:.0f} phi0={p.phi0:.3g} "
                  f"phi_slope={p.phi_slope:.3g} curve_rmse={p.curve_rmse:.3f} eff_rmse={p.eff_rmse:.3f}")
        return 0
    root = Path(args.fit) if args.fit else _default_data_dir()
    s = fit_pollux(root)
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / SURROGATE_FILE
    doc = s.to_json()
    doc["provenance"]["data_dir"] = "shared/data/profiles/pollux"
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False, default=float)
        f.write("\n")
    for p in s.profiles:
        print(f"{p.name:12s} kappa={p.kappa:.2f} tau={p.tau:.0f} m0={p.m0:.3g} m_inf={p.m_inf:.3g} "
              f"phi0={p.phi0:.3g} g={p.phi_slope:.3g} (gns {p.phi0_gns:.3g}, {p.phi_slope_gns:.3g}) "
              f"a={p.alpha_c:.3g} b={p.beta_c:.3g} sync={p.sync_intra:.3g}/{p.sync_inter:.3g} "
              f"rmse={p.curve_rmse:.3f}/{p.eff_rmse:.3f}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
