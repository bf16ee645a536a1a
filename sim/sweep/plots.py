"""Plots of a sweep folder: PNG files under DIR/plots/ and one DIR/index.html.

* ``jct_vs_load.png``: average and p99 JCT versus load, a line per policy, a panel per cluster
  (mean over seeds; bars span min..max).
* ``makespan_vs_load.png``: the same for makespan.
* ``wall_vs_nodes.png`` / ``wall_vs_jobs.png``: simulator wall time (engine only, log-log)
  versus nodes and versus jobs per cell, a line per policy (mean over the other axes).
* ``decision_latency_vs_nodes.png``: mean and p99 wall time of one policy decision versus nodes.
* ``jct_cdf.png``: JCT CDFs, a panel per (load, cluster), seeds pooled.
* ``ratio_vs_load.png``: average JCT and makespan as ratios to the baseline policy (paired
  bootstrap 95% intervals, sim.stats) versus load, a panel per cluster, axes shared by row.

Also DIR/summary.csv (every finished cell's summary row) and DIR/index.html
(:mod:`sim.sweep.report`).  Matplotlib's object API on the Agg canvas, as in sim.plots.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, NullLocator, ScalarFormatter

from ..errors import ConfigError
from ..plots import new_axes
from .report import cluster_title as _cluster_title
from .report import pick_baseline, ratio_rows, render_report
from .report import row_load as _load
from .store import SweepStore

__all__ = ["write_sweep_plots", "plot_ratios", "PLOT_FILES"]

PLOT_FILES = ("jct_vs_load.png", "makespan_vs_load.png", "wall_vs_nodes.png", "wall_vs_jobs.png",
              "decision_latency_vs_nodes.png", "jct_cdf.png", "ratio_vs_load.png")
RATIO_METRICS = (("avg_jct_s", "avg JCT"), ("makespan_s", "makespan"))
_DPI = 100
_META = {"Software": None}
_H = 3600.0


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=_DPI, metadata=_META)
    return path


def _colors(labels) -> dict:
    from matplotlib import colormaps
    cmap = colormaps["tab10" if len(labels) <= 10 else "tab20"]
    return {lab: cmap(i % cmap.N) for i, lab in enumerate(sorted(labels))}


def _stat(values) -> tuple[float, float, float]:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], float)
    if v.size == 0:
        return math.nan, math.nan, math.nan
    return float(v.mean()), float(v.min()), float(v.max())


def _series(rows, x_of, y_of, group_of=lambda r: r["policy_label"]):
    """{group: (x sorted, mean, lo, hi)} with y aggregated over rows sharing (group, x)."""
    acc = defaultdict(lambda: defaultdict(list))
    for r in rows:
        acc[group_of(r)][x_of(r)].append(y_of(r))
    out = {}
    for g, by_x in acc.items():
        xs = sorted(by_x)
        stats = [_stat(by_x[x]) for x in xs]
        out[g] = (np.asarray(xs, float), *(np.asarray(s, float) for s in zip(*stats)))
    return out


def _draw(ax, series, colors, *, logx=False, logy=False, marker="o"):
    for g in sorted(series):
        x, m, lo, hi = series[g]
        ok = np.isfinite(m)
        if not ok.any():
            continue
        ax.errorbar(x[ok], m[ok], yerr=[m[ok] - lo[ok], hi[ok] - m[ok]], label=g, color=colors[g],
                    marker=marker, ms=4, capsize=2, lw=1.2)
    if logx:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
    if logy:
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, alpha=0.3)


def _clusters(rows):
    seen = {}
    for r in rows:
        seen.setdefault(r["cluster"], r)
    return sorted(seen.values(), key=lambda r: (r["nodes"], r["cluster"]))


def _by_cluster_figure(rows, metrics, colors, path: Path, xlabel: str) -> Path:
    clusters = _clusters(rows)
    nc, nr = len(clusters), len(metrics)
    fig = Figure(figsize=(max(4.5, 3.4 * nc), 2.9 * nr + 0.6))
    axes = fig.subplots(nr, nc, squeeze=False)
    for j, crow in enumerate(clusters):
        sub = [r for r in rows if r["cluster"] == crow["cluster"]]
        for i, (key, ylabel) in enumerate(metrics):
            ax = axes[i][j]
            _draw(ax, _series(sub, _load, lambda r: r[key] / _H), colors)
            if i == 0:
                ax.set_title(_cluster_title(crow), fontsize=9)
            if j == 0:
                ax.set_ylabel(ylabel)
            if i == nr - 1:
                ax.set_xlabel(xlabel)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def _xy_figure(rows, x_key, panels, colors, path: Path, xlabel: str) -> Path:
    fig = Figure(figsize=(5.6 * len(panels), 4.2))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (key, ylabel, scale) in zip(axes, panels):
        _draw(ax, _series(rows, lambda r: float(r[x_key]), lambda r: r[key] * scale), colors,
              logx=True, logy=True)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def _cdf_figure(store: SweepStore, rows, colors, path: Path) -> Path:
    clusters = _clusters(rows)
    loads = sorted({_load(r) for r in rows})
    if len(loads) > 4:
        loads = [loads[0], loads[len(loads) // 2], loads[-1]]
    jobs = store.jobs([r["cell_id"] for r in rows], columns=["jct_s"])
    jct_by_cell = defaultdict(list)
    if jobs is not None:
        cells = jobs.column("cell").to_numpy(zero_copy_only=False)
        jct = jobs.column("jct_s").to_numpy()
        order = np.argsort(cells, kind="stable")
        cells, jct = cells[order], jct[order]
        uniq, start = np.unique(cells, return_index=True)
        for k, cid in enumerate(uniq):
            end = start[k + 1] if k + 1 < len(start) else len(cells)
            jct_by_cell[cid] = jct[start[k]:end]
    nr, nc = len(loads), len(clusters)
    fig = Figure(figsize=(max(4.5, 3.2 * nc), 2.6 * nr + 0.6))
    axes = fig.subplots(nr, nc, squeeze=False)
    for i, load in enumerate(loads):
        for j, crow in enumerate(clusters):
            ax = axes[i][j]
            pooled = defaultdict(list)
            for r in rows:
                if r["cluster"] == crow["cluster"] and _load(r) == load:
                    pooled[r["policy_label"]].append(jct_by_cell.get(r["cell_id"], np.empty(0)))
            for g in sorted(pooled):
                v = np.sort(np.concatenate(pooled[g])) / _H
                v = v[np.isfinite(v)]
                if v.size == 0:
                    continue
                if v.size > 2000:
                    v = v[np.unique(np.linspace(0, v.size - 1, 2000).astype(np.int64))]
                ax.step(v, np.linspace(0, 1, v.size + 1)[1:], where="post", color=colors[g],
                        label=g, lw=1.1)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, alpha=0.3)
            if i == 0:
                ax.set_title(_cluster_title(crow), fontsize=9)
            if j == 0:
                ax.set_ylabel(f"load {load:g}\nCDF")
            if i == nr - 1:
                ax.set_xlabel("JCT (h)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def plot_ratios(rows, baseline: str, metrics=RATIO_METRICS, axes=None, colors=None):
    """Ratios of each metric to ``baseline`` versus load with 95% paired bootstrap intervals: a
    row of panels per metric, a panel per cluster, y shared along a row and x down a column
    (1 = the baseline).  Draws into ``axes`` (metrics x clusters) or a new figure; returns the
    Figure."""
    clusters = _clusters(rows)
    shape = (len(metrics), len(clusters))
    colors = colors or _colors({r["policy_label"] for r in rows})
    if axes is None:
        fig = Figure(figsize=(max(4.5, 3.4 * shape[1]), 2.9 * shape[0] + 0.6))
        FigureCanvasAgg(fig)
        axes = fig.subplots(*shape, squeeze=False, sharex="col", sharey="row")
    else:
        fig, _ = new_axes(axes[0][0])
    for i, (metric, name) in enumerate(metrics):
        for j, crow in enumerate(clusters):
            sub = [r for r in rows if r["cluster"] == crow["cluster"]]
            _draw_ratios(axes[i][j], ratio_rows(sub, baseline, metric), colors)
            axes[i][j].set_title(_cluster_title(crow) if i == 0 else "", fontsize=9)
            axes[i][j].set_xlabel("load" if i == shape[0] - 1 else "")
        axes[i][0].set_ylabel(f"{name} / {baseline}")
    axes[0][0].legend(fontsize=7, loc="best")
    return fig


def _draw_ratios(ax, ratios, colors) -> None:
    by_policy = defaultdict(list)
    for r in ratios:
        by_policy[r["policy_label"]].append(r)
    for p in sorted(by_policy):
        rs = sorted(by_policy[p], key=lambda r: r["load"])
        x, m = np.array([r["load"] for r in rs]), np.array([r["ratio"] for r in rs])
        lo = np.nan_to_num(m - np.array([r["low"] for r in rs]))
        hi = np.nan_to_num(np.array([r["high"] for r in rs]) - m)
        ax.errorbar(x, m, yerr=[lo, hi], label=p, color=colors[p], marker="o", ms=4, capsize=2, lw=1.2)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.grid(True, alpha=0.3)


def _only(table, keep: set):
    import pyarrow as pa
    mask = pa.array([c in keep for c in table.column("cell_id").to_pylist()])
    out = table.filter(mask)
    return out if out.num_rows else None


_CAPTIONS = {
    "jct_vs_load.png": "Average and p99 job completion time versus load, a line per policy, a "
                       "panel per cluster (mean over seeds; bars: min..max).",
    "makespan_vs_load.png": "Makespan versus load.",
    "wall_vs_nodes.png": "Simulator wall time (engine only) versus nodes, log-log, mean over the "
                         "other axes.",
    "wall_vs_jobs.png": "Simulator wall time versus jobs per cell, log-log.",
    "decision_latency_vs_nodes.png": "Wall time of one scheduling decision (policy call) versus "
                                     "nodes: mean and p99.",
    "jct_cdf.png": "JCT CDFs per load (rows) and cluster (columns), seeds pooled.",
    "ratio_vs_load.png": "Average JCT and makespan as ratios to the baseline policy on the same "
                         "workloads versus load (geometric mean over paired seeds, 95% paired "
                         "bootstrap intervals), a panel per cluster.",
}


def write_sweep_plots(root, cell_ids=None, baseline: str | None = None) -> Path:
    """Draw every plot of the sweep in ``root`` and write its report; returns index.html's path.

    ``cell_ids`` limits the plots and tables to those cells (``clustersim sweep`` passes the
    spec's cells, so cells of policies excluded since stay out); default: every cell stored.
    ``baseline``: the policy label ratios are taken to (default: fifo if run, else the first).
    """
    store = SweepStore(root)
    root = Path(root)
    if not (root / "sweep.json").exists():
        raise ConfigError(f"{root} is not a sweep folder (sweep.json missing)")
    table, failures = store.summaries(), store.failures()
    if cell_ids is not None:
        keep = set(cell_ids)
        table, failures = (None if t is None else _only(t, keep) for t in (table, failures))
    rows = [] if table is None else table.to_pylist()
    written, base = [], None
    if table is not None:
        pacsv.write_csv(table.drop_columns([c for c in ("traceback",) if c in table.column_names]),
                        root / "summary.csv")
        base = pick_baseline((r["policy_label"] for r in rows), baseline)
        written = _draw_all(store, rows, root / "plots", base)
    return render_report(root / "index.html", manifest=store.manifest(), rows=rows,
                         failures=[] if failures is None else failures.to_pylist(), plots=written,
                         captions=_CAPTIONS, baseline=base)


def _draw_all(store: SweepStore, rows, plots_dir: Path, baseline: str) -> list[Path]:
    colors = _colors({r["policy_label"] for r in rows})
    jct = [("avg_jct_s", "avg JCT (h)"), ("p99_jct_s", "p99 JCT (h)")]
    wall = [("wall_seconds", "simulator wall time (s)", 1.0)]
    latency = [("mean_decision_ms", "mean decision latency (ms)", 1.0),
               ("p99_decision_ms", "p99 decision latency (ms)", 1.0)]
    return [
        _by_cluster_figure(rows, jct, colors, plots_dir / "jct_vs_load.png", "load"),
        _by_cluster_figure(rows, [("makespan_s", "makespan (h)")], colors,
                           plots_dir / "makespan_vs_load.png", "load"),
        _xy_figure(rows, "nodes", wall, colors, plots_dir / "wall_vs_nodes.png", "nodes"),
        _xy_figure(rows, "n_jobs", wall, colors, plots_dir / "wall_vs_jobs.png", "jobs per cell"),
        _xy_figure(rows, "nodes", latency, colors, plots_dir / "decision_latency_vs_nodes.png", "nodes"),
        _cdf_figure(store, rows, colors, plots_dir / "jct_cdf.png"),
        _save_tight(plot_ratios(rows, baseline, colors=colors), plots_dir / "ratio_vs_load.png"),
    ]


def _save_tight(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    return _save(fig, path)
