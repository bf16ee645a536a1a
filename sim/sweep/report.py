"""The sweep report: DIR/index.html rendered from a Jinja2 template (templates/report.html.j2).

Per cluster, a pivot table of policy x load for each headline metric: the mean over seeds (in
hours) and the ratio to the baseline policy with its 95% paired bootstrap interval
(:mod:`sim.stats`; runs pair up when they share seed, job count and trace).  Numbers have fixed
formats (:data:`FORMATS`).  The data the template sees is built here; the template only lays
it out.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..stats import paired_ratios

__all__ = ["METRICS", "FORMATS", "ratio_rows", "cluster_tables", "pick_baseline", "render_report",
           "row_load", "cluster_title"]

#: (summary column, heading, unit scale) of the pivot tables
METRICS = (("avg_jct_s", "average JCT (h)", 3600.0), ("p99_jct_s", "p99 JCT (h)", 3600.0),
           ("makespan_s", "makespan (h)", 3600.0))
#: fixed number formats of the report
FORMATS = {"value": "{:.2f}", "ratio": "{:.2f}", "load": "{:g}", "wall": "{:.2f}", "ms": "{:.3f}"}
_TEMPLATE = "report.html.j2"


def row_load(row: dict) -> float:
    """A summary row's load (traces without one: 1.0)."""
    v = row.get("load")
    return 1.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def cluster_title(row: dict) -> str:
    c = row["cluster"]
    if c.startswith("uniform:"):
        gpn = row["total_gpus"] // max(row["nodes"], 1)
        return f"{row['nodes']} nodes x {gpn} GPUs"
    return f"{c} ({row['nodes']} nodes)"


def pick_baseline(labels, wanted: str | None = None) -> str:
    """The baseline policy label: ``wanted``, else "fifo" when present, else the first label."""
    labels = sorted(set(labels))
    if wanted is not None:
        if wanted not in labels:
            from ..errors import ConfigError
            raise ConfigError(f"baseline {wanted!r} is not a policy of the sweep ({', '.join(labels)})")
        return wanted
    return "fifo" if "fifo" in labels else labels[0]


def _pairable(rows):
    """Rows with the columns the ratios group and pair by."""
    return [{**r, "_load": row_load(r), "_pair": (r.get("seed"), r.get("jobs"), r.get("trace"))}
            for r in rows]


def ratio_rows(rows, baseline: str, metric: str) -> list[dict]:
    """Ratios of ``metric`` to ``baseline`` per (cluster, load, policy label), with CIs."""
    out = paired_ratios(_pairable(rows), group=("cluster", "_load"), treatment="policy_label",
                        baseline=baseline, metric=metric, pair="_pair")
    for r in out:
        r["load"] = r.pop("_load")
    return out


@dataclass
class ClusterTable:
    """One cluster's pivot tables: ``cells[metric][policy][load]`` = (mean text, ratio text)."""

    title: str
    loads: list
    policies: list
    cells: dict = field(default_factory=dict)


def _fmt(kind: str, v) -> str:
    return "-" if v is None or not math.isfinite(v) else FORMATS[kind].format(v)


def _ratio_text(r: dict | None) -> str:
    if r is None:
        return ""
    if r["n"] < 2:
        return _fmt("ratio", r["ratio"])
    return f"{_fmt('ratio', r['ratio'])} [{_fmt('ratio', r['low'])}, {_fmt('ratio', r['high'])}]"


def _means(rows, metric: str, scale: float) -> dict:
    acc = defaultdict(list)
    for r in rows:
        acc[(r["cluster"], r["policy_label"], row_load(r))].append(r.get(metric))
    return {k: _mean(v) / scale for k, v in acc.items()}


def cluster_tables(rows, baseline: str) -> list[ClusterTable]:
    """Per cluster (by nodes, then name): policy x load of every metric in :data:`METRICS`."""
    first = {}
    for r in rows:
        first.setdefault(r["cluster"], r)
    tables = []
    for cluster, crow in sorted(first.items(), key=lambda kv: (kv[1]["nodes"], kv[0])):
        sub = [r for r in rows if r["cluster"] == cluster]
        t = ClusterTable(cluster_title(crow), sorted({row_load(r) for r in sub}),
                         sorted({r["policy_label"] for r in sub}))
        for metric, _, scale in METRICS:
            means = _means(sub, metric, scale)
            ratios = {(r["policy_label"], r["load"]): r for r in ratio_rows(sub, baseline, metric)}
            t.cells[metric] = {p: {ld: (_fmt("value", means.get((cluster, p, ld))),
                                        _ratio_text(ratios.get((p, ld)))) for ld in t.loads}
                               for p in t.policies}
        tables.append(t)
    return tables


#: the summary table: (heading, column, scale, format)
SUMMARY_COLUMNS = (("avg JCT (h)", "avg_jct_s", 3600.0, "value"), ("p99 JCT (h)", "p99_jct_s", 3600.0, "value"),
                   ("makespan (h)", "makespan_s", 3600.0, "value"), ("utilization", "utilization", 1.0, "value"),
                   ("wall (s)", "wall_seconds", 1.0, "wall"), ("decision (ms)", "mean_decision_ms", 1.0, "ms"))


def summary_table(rows) -> list[list[str]]:
    """One formatted row per (cluster, load, policy): cells and the means of SUMMARY_COLUMNS."""
    groups = defaultdict(list)
    for r in rows:
        groups[(r["nodes"], r["cluster"], row_load(r), r["policy_label"])].append(r)
    out = []
    for key in sorted(groups):
        g = groups[key]
        means = [_mean([r.get(col) for r in g]) for _, col, _, _ in SUMMARY_COLUMNS]
        out.append([cluster_title(g[0]), _fmt("load", key[2]), key[3], str(len(g))] +
                   [_fmt(kind, m / scale) for m, (_, _, scale, kind) in zip(means, SUMMARY_COLUMNS)])
    return out


def _mean(values) -> float:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return sum(v) / len(v) if v else math.nan


def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
    env = Environment(loader=PackageLoader(__package__, "templates"),
                      autoescape=select_autoescape(["html", "j2"]), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["fmt"] = lambda v, kind: _fmt(kind, v)
    return env


def render_report(path: Path, *, manifest: dict, rows, failures, plots, captions: dict,
                  baseline: str | None) -> Path:
    """Write the report to ``path`` (see the module docstring)."""
    from ..fsio import atomic_write_text
    context = {"manifest": manifest, "n_done": len(rows), "n_failed": len(failures),
               "failures": failures, "baseline": baseline, "metrics": METRICS,
               "plots": [(p.name, captions[p.name]) for p in plots],
               "tables": cluster_tables(rows, baseline) if rows else [],
               "summary": summary_table(rows),
               "summary_columns": ["cluster", "load", "policy", "cells"] + [h for h, *_ in SUMMARY_COLUMNS]}
    atomic_write_text(path, _environment().get_template(_TEMPLATE).render(**context))
    return path
