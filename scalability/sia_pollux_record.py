"""Record new runs of the Sia simulator's Pollux in a results file that sia_pollux_tests.py reads
(docs/goodput.md, "`sia-pollux` against the Sia simulator's Pollux").

    python scalability/sia_pollux_record.py LOGDIR --run draw_session36 \
        --out scalability/results/sia_fidelity/sia_pollux_draws_s36.json

LOGDIR holds, for each run, ``<folder>_<workload>.log`` (the simulator's ``--output``, e.g.
``saturn_workload-4.log``) and ``<folder>_<workload>.time`` (``/usr/bin/time -v`` of the run).
Each run's avg JCT, makespan, CPU seconds (user + sys) and per-job JCTs in the workload CSV's
job order go under ``theirs_new_draws``; ``theirs_draws`` lists every run of theirs on the
workload: those of the files in ``sia_pollux_tests.FILES`` (OUT itself left out), then this one.
Add OUT to ``FILES`` afterwards.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from sia_fidelity import last_record, their_metrics
from sia_pollux_tests import FILES, RESULTS


def earlier_runs(out_name: str) -> tuple[dict[str, list], dict[str, list]]:
    """(workload -> its runs of theirs so far, workload -> its job names) from the recorded files."""
    runs, names = {}, {}
    for f in FILES:
        if f == out_name:
            continue
        for w, rec in json.loads((RESULTS / f).read_text())["workloads"].items():
            if rec.get("theirs_draws"):
                runs[w] = rec["theirs_draws"]
            if rec.get("job_names"):
                names[w] = rec["job_names"]
    return runs, names


def cpu_seconds(time_file: Path) -> float:
    """User + system seconds from ``/usr/bin/time -v`` output."""
    text = time_file.read_text()
    try:
        return sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", text).group(1))
                   for kind in ("User", "System"))
    except AttributeError:
        raise ValueError(f"{time_file}: no 'User/System time (seconds)' line of /usr/bin/time -v") from None


def record(log: Path, run: str, names: list[str]) -> dict:
    """One run of theirs: its metrics and every job's JCT in ``names`` order."""
    last = last_record(log)
    m = their_metrics(log, last)
    jct = {j["name"]: j["completion_time"] - j["submission_time"] for j in last["submitted_jobs"]}
    missing = [n for n in names if n not in jct]
    if missing:
        raise ValueError(f"{log}: jobs {missing[:3]} of the workload are not in the log")
    return {"run": run, **m, "cpu_s": round(cpu_seconds(log.with_suffix(".time")), 2),
            "per_job_jct_s": [jct[n] for n in names]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logdir", type=Path)
    ap.add_argument("--run", required=True, help="the name of these runs, e.g. draw_session36")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--about", default="", help="what the file holds, for its 'about' field")
    args = ap.parse_args()
    runs, names = earlier_runs(args.out.name)
    out = {"about": args.about, "their_command": json.loads((RESULTS / FILES[-1]).read_text()).get("their_command"),
           "workloads": {}}
    for log in sorted(args.logdir.glob("*.log")):
        folder, stem = log.stem.split("_", 1)
        w = f"{folder}/{stem}"
        if w not in names:
            raise ValueError(f"{log}: no recorded job order for {w} in {', '.join(FILES)}")
        new = record(log, args.run, names[w])
        out["workloads"][w] = {"job_names": names[w],
                               "theirs_draws": runs.get(w, []) + [{"run": args.run, "avg_jct_s": new["avg_jct_s"]}],
                               "theirs_new_draws": [new]}
        print(f"{w}: {new['avg_jct_s']:.1f} s, {new['cpu_s']:.0f} CPU-s; runs of theirs now "
              + ", ".join(f"{d['avg_jct_s']:.0f}" for d in out["workloads"][w]["theirs_draws"]))
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
