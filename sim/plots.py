"""Plots of runs: the JCT CDF of several policies, and one run's queue and utilization.

Every plot function draws into the axes it is given (``ax=``, e.g. a notebook's
``plt.subplots()``) or into a new figure, returns the Figure, and writes a PNG when given a
path.  New figures use matplotlib's object API on the Agg canvas (no pyplot, no display, no
global state).  File names are fixed: :func:`write_plots` writes ``<outdir>/jct_cdf.png`` and
``<outdir>/<policy>/timeline.png``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .errors import ConfigError
from .fsio import atomic_path

if TYPE_CHECKING:
    from .engine import SimResult

__all__ = ["plot_jct_cdf", "plot_timeline", "write_plots", "policy_dirname", "new_axes"]

_DPI = 100
#: longer series are binned before drawing (plot time stays ~0.5 s at 10^5 jobs)
_MAX_POINTS = 2000
_META = {"Software": None}  # no version string in the file: same bytes across matplotlib builds


def _save(fig: Figure, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=_DPI, metadata=_META)
    return path


def new_axes(ax=None, *, nrows: int = 1, figsize=(6.4, 4.2), sharex: bool = False):
    """``ax`` (an Axes, or a sequence of ``nrows`` Axes) and its Figure; else a new Agg figure
    with ``nrows`` stacked axes (one Axes when ``nrows`` is 1)."""
    if ax is not None:
        first = ax if nrows == 1 else ax[0]
        if nrows > 1 and len(ax) != nrows:
            raise ConfigError(f"ax: expected {nrows} Axes, got {len(ax)}")
        return first.figure, ax
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, 1, sharex=sharex)
    return fig, axes


def _finish(fig: Figure, path, own: bool) -> Figure:
    if own:
        fig.tight_layout()
    if path is not None:
        _save(fig, path)
    return fig


def policy_dirname(name: str) -> str:
    """A policy name as a safe folder name (characters outside [A-Za-z0-9._-] become '_')."""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", str(name)).strip(".")
    return s or "policy"


def plot_jct_cdf(results: Mapping[str, "SimResult"], path=None, *, ax=None) -> Figure:
    """Empirical CDF of JCT (hours, log x axis when the range is wide), one line per policy;
    drawn into ``ax`` or a new figure, written to ``path`` if given."""
    if not results:
        raise ConfigError("plot_jct_cdf: no results to plot")
    own = ax is None
    fig, ax = new_axes(ax)
    lo, hi = np.inf, 0.0
    for name, r in results.items():
        jct = np.sort((r.finish - r.jobs.arrival)[np.isfinite(r.finish)]) / 3600.0
        if jct.size == 0:
            continue
        frac = np.arange(1, jct.size + 1) / jct.size
        if jct.size > _MAX_POINTS:     # exact CDF points at evenly spaced ranks
            keep = np.unique(np.linspace(0, jct.size - 1, _MAX_POINTS).astype(np.int64))
            jct, frac = jct[keep], frac[keep]
        ax.step(np.concatenate([[jct[0]], jct]), np.concatenate([[0.0], frac]), where="post",
                label=str(name))
        pos = jct[jct > 0]
        if pos.size:
            lo, hi = min(lo, pos[0]), max(hi, pos[-1])
    if np.isfinite(lo) and hi / lo > 100:
        ax.set_xscale("log")
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title("JCT CDF")
    return _finish(fig, path, own)


def _timeline_series(result: "SimResult"):
    """Times (h since first arrival), queue length, utilization; closed with the last finish."""
    tl = result.timeline.arrays()
    t, q, used = tl["time"], tl["queued"].astype(float), tl["used_gpus"].astype(float)
    start = float(np.min(result.jobs.arrival)) if len(result.jobs) else 0.0
    end = float(np.max(result.finish)) if len(result.jobs) else start
    if t.size == 0 or end > t[-1]:
        t = np.append(t, end)
        q = np.append(q, 0.0)
        used = np.append(used, 0.0)
    total = max(int(result.cluster.total_gpus), 1)
    return (t - start) / 3600.0, q, used / total


def _bin_step(t: np.ndarray, v: np.ndarray, bins: int):
    """A step function (value v[k] from t[k] on) over ``bins`` equal time bins: bin edges, the
    time-weighted mean, min and max of each bin."""
    edges = np.linspace(t[0], t[-1], bins + 1)
    integral = np.zeros(t.size)
    integral[1:] = np.cumsum(v[:-1] * np.diff(t))
    mean = np.diff(np.interp(edges, t, integral)) / np.diff(edges)
    # the last point only closes the series (it holds for no time): leave it out of min/max
    body = v[:-1]
    k = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, body.size - 1)
    lo = np.minimum(np.minimum.reduceat(body, k[:-1]), body[k[1:]])
    hi = np.maximum(np.maximum.reduceat(body, k[:-1]), body[k[1:]])
    return edges, mean, lo, hi


def _draw_step(ax, t: np.ndarray, v: np.ndarray, color: str) -> None:
    if t.size <= _MAX_POINTS or not t[-1] > t[0]:
        ax.step(t, v, where="post", color=color)
        return
    edges, mean, lo, hi = _bin_step(t, v, _MAX_POINTS)
    ax.fill_between(edges[:-1], lo, hi, step="post", color=color, alpha=0.25, linewidth=0,
                    label="min-max per bin")
    ax.step(edges[:-1], mean, where="post", color=color, label="time-weighted mean per bin")
    ax.legend(loc="upper right", fontsize="small")


def plot_timeline(result: "SimResult", path=None, *, ax=None) -> Figure:
    """Queue length (jobs waiting) and GPU utilization over time, as step plots after each
    decision point, into ``ax`` (two Axes: queue, utilization) or a new figure; written to
    ``path`` if given.  Beyond ``_MAX_POINTS`` decision points the series is drawn per time
    bin: the time-weighted mean as a step line, the min..max range shaded."""
    t, q, util = _timeline_series(result)
    own = ax is None
    fig, (ax_q, ax_u) = new_axes(ax, nrows=2, figsize=(7.0, 4.8), sharex=True)
    _draw_step(ax_q, t, q, "tab:orange")
    ax_q.set_ylabel("queued jobs")
    ax_q.grid(True, alpha=0.3)
    _draw_step(ax_u, t, util * 100.0, "tab:blue")
    ax_u.set_ylabel("GPU utilization (%)")
    ax_u.set_ylim(0, 105)
    ax_u.set_xlabel("time since first arrival (h)")
    ax_u.grid(True, alpha=0.3)
    ax_q.set_title(f"{result.policy} on {result.cluster.name}")
    return _finish(fig, path, own)


def write_plots(results: Mapping[str, "SimResult"], outdir) -> list[Path]:
    """Write ``outdir/jct_cdf.png`` and ``outdir/<policy>/timeline.png``; returns the paths."""
    if not results:
        raise ConfigError("write_plots: no results to plot")
    outdir = Path(outdir)
    dirs = [policy_dirname(n) for n in results]
    if len(set(dirs)) != len(dirs):
        raise ConfigError(f"write_plots: policy names {list(results)} map to the same folder names")
    paths = [outdir / "jct_cdf.png"] + [outdir / d / "timeline.png" for d in dirs]
    plot_jct_cdf(results, paths[0])
    for path, r in zip(paths[1:], results.values()):
        plot_timeline(r, path)
    return paths
