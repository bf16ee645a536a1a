"""Plots of a sweep folder: PNG files under DIR/plots/ and one DIR/index.html.

* ``jct_vs_load.png``: average and p99 JCT versus load, a line per policy, a panel per cluster
  (mean over seeds; bars span min..max).
* ``makespan_vs_load.png``: the same for makespan.
* ``wall_vs_nodes.png`` / ``wall_vs_jobs.png``: simulator wall time (engine only, log-log)
  versus nodes and versus jobs per cell, a line per policy (mean over the other axes).
* ``decision_latency_vs_nodes.png``: mean and p99 wall time of one policy decision versus nodes.
* ``jct_cdf.png``: JCT CDFs, a panel per (load, cluster), seeds pooled.

Also DIR/summary.csv (every finished cell's summary row).  Matplotlib's object API on the Agg
canvas, as in sim.plots.
"""
from __future__ import annotations

import html
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, NullLocator, ScalarFormatter

from ..errors import ConfigError
from .store import SweepStore

__all__ = ["write_sweep_plots", "PLOT_FILES"]

PLOT_FILES = ("jct_vs_load.png", "makespan_vs_load.png", "wall_vs_nodes.png", "wall_vs_jobs.png",
              "decision_latency_vs_nodes.png", "jct_cdf.png")
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


def _cluster_title(row: dict) -> str:
    c = row["cluster"]
    if c.startswith("uniform:"):
        gpn = row["total_gpus"] // max(row["nodes"], 1)
        return f"{row['nodes']} nodes x {gpn} GPUs"
    return f"{c} ({row['nodes']} nodes)"


def _load(row: dict) -> float:
    v = row.get("load")
    return 1.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


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


def _table_html(rows) -> str:
    groups = defaultdict(list)
    for r in rows:
        groups[(r["nodes"], r["cluster"], _load(r), r["policy_label"])].append(r)
    cols = [("avg JCT (h)", "avg_jct_s", _H), ("p99 JCT (h)", "p99_jct_s", _H),
            ("makespan (h)", "makespan_s", _H), ("utilization", "utilization", 1.0),
            ("wall (s)", "wall_seconds", 1.0), ("decision (ms)", "mean_decision_ms", 1.0)]
    out = ["<table><tr><th>cluster</th><th>load</th><th>policy</th><th>cells</th>"
           + "".join(f"<th>{h}</th>" for h, _, _ in cols) + "</tr>"]
    for key in sorted(groups):
        g = groups[key]
        cells = "".join(f"<td>{_stat([r[k] for r in g])[0] / s:.3g}</td>" for _, k, s in cols)
        out.append(f"<tr><td>{html.escape(_cluster_title(g[0]))}</td><td>{key[2]:g}</td>"
                   f"<td>{html.escape(key[3])}</td><td>{len(g)}</td>{cells}</tr>")
    out.append("</table>")
    return "\n".join(out)


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
}


def write_sweep_plots(root, cell_ids=None) -> Path:
    """Draw every plot of the sweep in ``root``; returns the path of index.html.

    ``cell_ids`` limits the plots and tables to those cells (``clustersim sweep`` passes the
    spec's cells, so cells of policies excluded since stay out); default: every cell stored.
    """
    store = SweepStore(root)
    root = Path(root)
    if not (root / "sweep.json").exists():
        raise ConfigError(f"{root} is not a sweep folder (sweep.json missing)")
    manifest = store.manifest()
    table = store.summaries()
    failures = store.failures()
    if cell_ids is not None:
        keep = set(cell_ids)
        table, failures = (None if t is None else _only(t, keep) for t in (table, failures))
    plots_dir = root / "plots"
    written = []
    if table is not None:
        pacsv.write_csv(table.drop_columns([c for c in ("traceback",) if c in table.column_names]),
                        root / "summary.csv")
        rows = table.to_pylist()
        colors = _colors({r["policy_label"] for r in rows})
        written.append(_by_cluster_figure(rows, [("avg_jct_s", "avg JCT (h)"),
                                                 ("p99_jct_s", "p99 JCT (h)")],
                                          colors, plots_dir / "jct_vs_load.png", "load"))
        written.append(_by_cluster_figure(rows, [("makespan_s", "makespan (h)")], colors,
                                          plots_dir / "makespan_vs_load.png", "load"))
        written.append(_xy_figure(rows, "nodes", [("wall_seconds", "simulator wall time (s)", 1.0)],
                                  colors, plots_dir / "wall_vs_nodes.png", "nodes"))
        written.append(_xy_figure(rows, "n_jobs", [("wall_seconds", "simulator wall time (s)", 1.0)],
                                  colors, plots_dir / "wall_vs_jobs.png", "jobs per cell"))
        written.append(_xy_figure(rows, "nodes",
                                  [("mean_decision_ms", "mean decision latency (ms)", 1.0),
                                   ("p99_decision_ms", "p99 decision latency (ms)", 1.0)],
                                  colors, plots_dir / "decision_latency_vs_nodes.png", "nodes"))
        written.append(_cdf_figure(store, rows, colors, plots_dir / "jct_cdf.png"))
    n_done = 0 if table is None else table.num_rows
    n_fail = 0 if failures is None else failures.num_rows
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>sweep "
             f"{html.escape(manifest['name'])}</title><style>body{{font-family:sans-serif;"
             f"margin:2em}} table{{border-collapse:collapse;font-size:12px}} td,th{{border:1px "
             f"solid #ccc;padding:2px 6px;text-align:right}} img{{max-width:100%}}</style></head>"
             f"<body><h1>Sweep {html.escape(manifest['name'])}</h1>",
             f"<p>{html.escape(manifest.get('description', ''))}</p>",
             f"<p>spec: <code>{html.escape(str(manifest.get('source')))}</code>, fingerprint "
             f"<code>{manifest['fingerprint']}</code>; {n_done} cells finished, {n_fail} failed. "
             f"Data: <code>summary/</code> and <code>jobs/</code> (Parquet, partitioned by cell), "
             f"<a href='summary.csv'>summary.csv</a>.</p>"]
    for p in written:
        parts.append(f"<h2>{p.name}</h2><p>{html.escape(_CAPTIONS[p.name])}</p>"
                     f"<img src='plots/{p.name}' alt='{p.name}'>")
    if table is not None:
        parts.append("<h2>Summary (mean over seeds)</h2>" + _table_html(table.to_pylist()))
    if failures is not None:
        parts.append("<h2>Failed cells</h2><ul>" + "".join(
            f"<li>{html.escape(r['label'])}: <code>{html.escape(r['error'])}</code></li>"
            for r in failures.to_pylist()) + "</ul>")
    parts.append("</body></html>")
    index = root / "index.html"
    index.write_text("\n".join(parts))
    return index
