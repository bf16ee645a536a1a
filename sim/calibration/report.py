"""Hold-out validation of the fitted models: fit on some placements and batch sizes, predict the rest.

Split of one (model, GPU type), deterministic (:func:`holdout_split`):

* placements (the GPUs-per-server list, or ``"<N>n<K>g"`` when only the counts are known) sorted by
  (GPUs, servers, name); the 1-GPU placement always trains; of the others every ``every``-th,
  starting with the second, is held out;
* batch sizes sorted; every ``every``-th, starting with the second, is held out, never the smallest
  or the largest (so held-out batch sizes are interpolated, as a scheduler would);
* the fit sees only rows whose placement and batch size are both kept.

Errors are absolute percentage errors of the step time (:func:`~sim.calibration.observations.ape`).  The
target (issue 5) is a median of at most 10% on held-out placements for each model and GPU type;
the p90 is reported beside it, and the same for held-out batch sizes and for all held-out rows.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from .fit import fit
from .models import KINDS
from .observations import Observations, ape, group_observations
from .schema import CalibrationWarning

__all__ = ["holdout_split", "holdout_errors", "summarize", "markdown_table", "plot_predicted_vs_measured",
           "TARGET_MEDIAN_APE", "ERROR_SCHEMA", "SUMMARY_SCHEMA", "DIAGNOSTICS_SCHEMA", "validate",
           "diagnostics", "diagnostics_table", "misses_table"]

TARGET_MEDIAN_APE = 10.0

DIAGNOSTICS_SCHEMA = pa.schema([
    ("model", pa.string()), ("gpu_type", pa.string()), ("shape_floor_med", pa.float64()),
    ("shape_floor_p90", pa.float64()), ("linear_1gpu_med", pa.float64()), ("nonmonotone_pct", pa.float64()),
])

ERROR_SCHEMA = pa.schema([
    ("model", pa.string()), ("gpu_type", pa.string()), ("kind", pa.string()),
    ("split", pa.string()),            # train | placement | batch | placement+batch
    ("placement", pa.string()), ("n_nodes", pa.int32()), ("n_gpus", pa.int32()),
    ("local_bsz", pa.int32()), ("measured_s", pa.float64()), ("predicted_s", pa.float64()),
    ("ape_pct", pa.float64()),
])

SUMMARY_SCHEMA = pa.schema([
    ("model", pa.string()), ("gpu_type", pa.string()), ("kind", pa.string()),
    ("n_train", pa.int64()), ("n_heldout", pa.int64()), ("n_heldout_placement", pa.int64()),
    ("median_ape_placement", pa.float64()), ("p90_ape_placement", pa.float64()),
    ("median_ape_batch", pa.float64()), ("p90_ape_batch", pa.float64()),
    ("median_ape_heldout", pa.float64()), ("p90_ape_heldout", pa.float64()),
    ("median_ape_train", pa.float64()), ("meets_target", pa.bool_()),
    ("n_warnings", pa.int64()),
])


def holdout_split(obs: Observations, every: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(held-out placement mask, held-out batch-size mask) of one group's rows."""
    if every < 2:
        raise ValueError("every must be >= 2")
    keys = np.array(obs.placement_key or [f"{int(n)}n{int(k)}g" for n, k in zip(obs.n_nodes, obs.n_gpus)],
                    dtype=object)
    first = {}
    for i, kkey in enumerate(keys):
        first.setdefault(kkey, i)
    order = sorted(first, key=lambda kk: (obs.n_gpus[first[kk]], obs.n_nodes[first[kk]], kk))
    multi = [kk for kk in order if obs.n_gpus[first[kk]] > 1]
    held_p = {kk for i, kk in enumerate(multi) if i % every == 1}
    hp = np.array([kk in held_p for kk in keys], bool)
    bs = np.unique(obs.local_bsz)
    held_b = {b for i, b in enumerate(bs) if i % every == 1 and 0 < i < len(bs) - 1}
    hb = np.isin(obs.local_bsz, list(held_b))
    return hp, hb


def _rows(obs: Observations, kind: str, pred: np.ndarray, hp: np.ndarray, hb: np.ndarray) -> dict:
    split = np.where(hp & hb, "placement+batch", np.where(hp, "placement", np.where(hb, "batch", "train")))
    keys = obs.placement_key or tuple(f"{int(n)}n{int(k)}g" for n, k in zip(obs.n_nodes, obs.n_gpus))
    return dict(model=[obs.model] * obs.n, gpu_type=[obs.gpu_type] * obs.n, kind=[kind] * obs.n,
                split=split.tolist(), placement=list(keys), n_nodes=obs.n_nodes.astype(np.int32),
                n_gpus=obs.n_gpus.astype(np.int32), local_bsz=obs.local_bsz.astype(np.int32),
                measured_s=obs.step, predicted_s=pred, ape_pct=ape(pred, obs.step))


def holdout_errors(table: pa.Table, kinds: Sequence[str] = KINDS, *, every: int = 3,
                   source: str = "<memory>") -> tuple[pa.Table, dict]:
    """Fit on the kept rows of every (model, GPU type), predict all rows.

    Returns (per-row errors in :data:`ERROR_SCHEMA`, ``{(model, gpu, kind): fit warnings}``).
    """
    parts, notes = [], {}
    for (m, g), obs in group_observations(table, source).items():
        hp, hb = holdout_split(obs, every)
        train = ~(hp | hb)
        for kind in kinds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CalibrationWarning)
                res = fit(obs.subset(train), kind, emit_warnings=False)
            notes[(m, g, kind)] = list(res.warnings)
            pred = res.predict(obs.local_bsz, obs.n_nodes, obs.n_gpus, 0, obs.max_per_node)
            parts.append(pa.table(_rows(obs, kind, pred, hp, hb), schema=ERROR_SCHEMA))
    if not parts:
        return ERROR_SCHEMA.empty_table(), notes
    return pa.concat_tables(parts), notes


def diagnostics(obs: Observations) -> dict[str, float]:
    """Lower bounds that explain misses, from the data alone (no fit):

    * ``shape_floor_med`` / ``shape_floor_p90``: APE of predicting each row by the median step time
      of the rows sharing its (multi-node?, GPUs, batch size) -- the most a model whose network term
      sees only those (Pollux's, Hops') can know; what remains is placement *shape* (how the GPUs are
      spread over servers) or noise;
    * ``linear_1gpu_med``: median APE of the best straight line through the 1-GPU step times against
      the batch size -- how far compute is from the linear ``alpha_c + beta_c b``;
    * ``nonmonotone_pct``: share of consecutive batch sizes (same placement) whose step time *drops*
      by more than 5% as the batch grows.
    """
    keys = np.array(obs.placement_key or [f"{int(n)}n{int(k)}g" for n, k in zip(obs.n_nodes, obs.n_gpus)],
                    dtype=object)
    groups: dict = {}
    for i, key in enumerate(zip(obs.n_nodes > 1, obs.n_gpus, obs.local_bsz)):
        groups.setdefault(key, []).append(i)
    floor = np.zeros(obs.n)
    for idx in groups.values():
        v = obs.step[idx]
        floor[idx] = ape(np.full(len(idx), np.median(v)), v)
    one = obs.n_gpus == 1
    lin = float("nan")
    if np.unique(obs.local_bsz[one]).size >= 3:
        coef = np.polyfit(obs.local_bsz[one], obs.step[one], 1)
        lin = float(np.median(ape(np.polyval(coef, obs.local_bsz[one]), obs.step[one])))
    drops, pairs = 0, 0
    for key in set(keys.tolist()):
        sel = keys == key
        order = np.argsort(obs.local_bsz[sel], kind="stable")
        st = obs.step[sel][order]
        drops += int(np.sum(st[1:] < 0.95 * st[:-1]))
        pairs += max(st.size - 1, 0)
    return dict(shape_floor_med=float(np.median(floor)), shape_floor_p90=float(np.percentile(floor, 90)),
                linear_1gpu_med=lin, nonmonotone_pct=100.0 * drops / pairs if pairs else float("nan"))


def diagnostics_table(table: pa.Table, source: str = "<memory>") -> pa.Table:
    """:func:`diagnostics` of every (model, GPU type)."""
    rows = [dict(model=m, gpu_type=g, **diagnostics(obs))
            for (m, g), obs in group_observations(table, source).items()]
    return pa.Table.from_pylist(rows, schema=DIAGNOSTICS_SCHEMA)


def _stats(x: np.ndarray) -> tuple[float, float]:
    if x.size == 0:
        return float("nan"), float("nan")
    return float(np.median(x)), float(np.percentile(x, 90))


def summarize(errors: pa.Table, notes: dict | None = None) -> pa.Table:
    """Per (model, GPU type, kind) medians and p90s of the APE (:data:`SUMMARY_SCHEMA`)."""
    d = errors.to_pydict()
    model, gpu, kind = (np.array(d[c], dtype=object) for c in ("model", "gpu_type", "kind"))
    split = np.array(d["split"], dtype=object)
    e = np.asarray(d["ape_pct"], float)
    rows = []
    for key in sorted(set(zip(model.tolist(), gpu.tolist(), kind.tolist()))):
        sel = (model == key[0]) & (gpu == key[1]) & (kind == key[2])
        sp, ee = split[sel], e[sel]
        pl = np.isin(sp, ["placement", "placement+batch"])
        bt = sp == "batch"
        ho = sp != "train"
        mp, pp = _stats(ee[pl])
        mb, pb = _stats(ee[bt])
        mh, ph = _stats(ee[ho])
        mt, _ = _stats(ee[~ho])
        rows.append(dict(model=key[0], gpu_type=key[1], kind=key[2], n_train=int((~ho).sum()),
                         n_heldout=int(ho.sum()), n_heldout_placement=int(pl.sum()),
                         median_ape_placement=mp, p90_ape_placement=pp, median_ape_batch=mb,
                         p90_ape_batch=pb, median_ape_heldout=mh, p90_ape_heldout=ph,
                         median_ape_train=mt, meets_target=_verdict(mp),
                         n_warnings=len((notes or {}).get(key, []))))
    return pa.Table.from_pylist(rows, schema=SUMMARY_SCHEMA)


def _verdict(median_ape_placement: float) -> bool | None:
    """Whether held-out placements meet the target; None (no verdict) when there are none, as in
    a trace of one GPU, whose single placement always trains."""
    if np.isnan(median_ape_placement):
        return None
    return bool(median_ape_placement <= TARGET_MEDIAN_APE)


def validate(table: pa.Table, kinds: Sequence[str] = KINDS, *, every: int = 3,
             source: str = "<memory>") -> tuple[pa.Table, pa.Table, dict]:
    """:func:`holdout_errors` then :func:`summarize`: (errors, summary, fit warnings)."""
    errors, notes = holdout_errors(table, kinds, every=every, source=source)
    return errors, summarize(errors, notes), notes


def _fmt(x: float) -> str:
    return "–" if x != x else f"{x:.1f}"


def markdown_table(summary: pa.Table, kinds: Sequence[str] = KINDS) -> str:
    """One row per (model, GPU type); per kind: held-out placements median / p90, batch sizes, all."""
    s = summary.to_pylist()
    by = {}
    for r in s:
        by.setdefault((r["model"], r["gpu_type"]), {})[r["kind"]] = r
    head = "| model | GPU type | n fit / held out |"
    sep = "|---|---|---|"
    for k in kinds:
        head += f" {k}: placements med / p90 | {k}: batch sizes med / p90 | {k}: all held-out med / p90 |"
        sep += "---|---|---|"
    lines = [head, sep]
    for (m, g), per in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        any_r = next(iter(per.values()))
        line = f"| {m} | {g} | {any_r['n_train']} / {any_r['n_heldout']} |"
        for k in kinds:
            r = per.get(k)
            if r is None:
                line += " – | – | – |"
                continue
            flag = {True: "", False: " **✗**", None: " (no held-out placement)"}[r["meets_target"]]
            line += (f" {_fmt(r['median_ape_placement'])} / {_fmt(r['p90_ape_placement'])}{flag} |"
                     f" {_fmt(r['median_ape_batch'])} / {_fmt(r['p90_ape_batch'])} |"
                     f" {_fmt(r['median_ape_heldout'])} / {_fmt(r['p90_ape_heldout'])} |")
        lines.append(line)
    return "\n".join(lines)


def plot_predicted_vs_measured(errors: pa.Table, path=None, *, ax=None, heldout_only: bool = True,
                               title: str | None = None):
    """Log-log scatter of predicted vs measured step time: one panel per (kind, GPU type), into
    ``ax`` (a grid of Axes, kinds x GPU types) or a new figure; written to ``path`` if given.
    Returns the Figure."""
    import matplotlib
    from matplotlib.figure import Figure          # no pyplot: no global backend or figure state

    d = errors.to_pydict()
    split = np.array(d["split"], dtype=object)
    keep = split != "train" if heldout_only else np.ones(split.size, bool)
    kinds = sorted(set(np.array(d["kind"], dtype=object)[keep].tolist()))
    gpus = sorted(set(np.array(d["gpu_type"], dtype=object)[keep].tolist()))
    models = sorted(set(np.array(d["model"], dtype=object)[keep].tolist()))
    nr, nc = max(len(kinds), 1), max(len(gpus), 1)
    if ax is None:
        fig = Figure(figsize=(3.2 * nc, 3.2 * nr))
        axes = fig.subplots(nr, nc, squeeze=False)
    else:
        axes = np.asarray(ax, dtype=object)
        if axes.size != nr * nc:
            raise ConfigError(f"ax: expected {nr} x {nc} Axes (kinds x GPU types), got {axes.size}")
        axes = axes.reshape(nr, nc)
        fig = axes[0][0].figure
    cmap = matplotlib.colormaps["tab10"]
    kind_a, gpu_a, model_a = (np.array(d[c], dtype=object) for c in ("kind", "gpu_type", "model"))
    meas, pred = np.asarray(d["measured_s"], float), np.asarray(d["predicted_s"], float)
    for i, k in enumerate(kinds):
        for j, g in enumerate(gpus):
            ax = axes[i][j]
            sel = keep & (kind_a == k) & (gpu_a == g)
            if sel.any():
                lo, hi = min(meas[sel].min(), pred[sel].min()) * 0.8, max(meas[sel].max(), pred[sel].max()) * 1.25
                xs = np.array([lo, hi])
                ax.plot(xs, xs, color="black", lw=0.8)
                ax.plot(xs, xs * 1.1, color="grey", lw=0.6, ls="--")
                ax.plot(xs, xs / 1.1, color="grey", lw=0.6, ls="--")
                for mi, m in enumerate(models):
                    s2 = sel & (model_a == m)
                    if s2.any():
                        ax.scatter(meas[s2], pred[s2], s=4, alpha=0.5, color=cmap(mi % 10), label=m)
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_xlim(lo, hi)
                ax.set_ylim(lo, hi)
            ax.set_title(f"{k} · {g}", fontsize=9)
            if i == len(kinds) - 1:
                ax.set_xlabel("measured step time (s)", fontsize=8)
            if j == 0:
                ax.set_ylabel("predicted (s)", fontsize=8)
            ax.tick_params(labelsize=7)
    handles, labels = [], []
    for ax in axes.ravel():
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if ax is None:                 # the figure is ours: legend, title and layout too
        if handles:
            fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 8), fontsize=8, markerscale=3)
        fig.suptitle(title or ("held-out " if heldout_only else "") + "step time: predicted vs measured (dashed: ±10%)",
                     fontsize=10)
        fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return fig


def misses_table(summary: pa.Table, diagnostics: pa.Table) -> str:
    """Markdown rows of the (model, GPU type, kind) that miss the target, with the data diagnostics."""
    diag = {(r["model"], r["gpu_type"]): r for r in diagnostics.to_pylist()}
    lines = ["| model | GPU type | kind | held-out placements med / p90 | fit (in-sample) med | "
             "shape floor med / p90 | 1-GPU linear-compute med | batch-size drops % |",
             "|---|---|---|---|---|---|---|---|"]
    for r in summary.to_pylist():
        if r["meets_target"] is not False:
            continue
        d = diag.get((r["model"], r["gpu_type"]), {})

        def g(key, d=d):
            return d.get(key, float("nan"))
        lines.append(f"| {r['model']} | {r['gpu_type']} | {r['kind']} | {_fmt(r['median_ape_placement'])} / "
                     f"{_fmt(r['p90_ape_placement'])} | {_fmt(r['median_ape_train'])} | "
                     f"{_fmt(g('shape_floor_med'))} / {_fmt(g('shape_floor_p90'))} | "
                     f"{_fmt(g('linear_1gpu_med'))} | {_fmt(g('nonmonotone_pct'))} |")
    return "\n".join(lines)
