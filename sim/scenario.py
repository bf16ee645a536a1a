"""A scenario: one cluster, one workload, several policies, run side by side.

The embedded default (``clustersim run`` with no arguments) is Gavel's
heterogeneous 108-GPU cluster (36 V100, 36 P100, 36 K80) with 300 jobs drawn by
the Gavel-style generator at 6 jobs/hour, seed 0, under every queue policy.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .cluster import Cluster
from .engine import EngineConfig, SimResult, simulate
from .errors import ConfigError
from .goodput.workload import is_pollux_workload, read_goodput_workload
from .jobs import JobTable
from .policies import get_policy
from .presets import load_cluster
from .throughput import TableThroughput
from .workload import generate_workload

DEFAULT_CLUSTER = "gavel-108"
DEFAULT_JOBS = 300
DEFAULT_LOAD = 6.0
DEFAULT_POLICIES = ("fifo", "sjf", "srtf", "las", "tiresias")


@dataclass
class Scenario:
    cluster: str = DEFAULT_CLUSTER
    workload: str = "generate"            # "generate" or a job-table file (Parquet/CSV)
    jobs: int = DEFAULT_JOBS
    load: float = DEFAULT_LOAD
    sizes: str = "gavel"
    durations: str = "gavel"
    policies: tuple[str, ...] = DEFAULT_POLICIES
    placement: str = "consolidated"
    seed: int = 0
    round_s: float | None = None
    restart_delay_s: float | None = None
    throughputs: str | None = None        # "replay", a Gavel JSON or a calib.toml; default built-in
    progress: bool = False
    policy_params: dict = field(default_factory=dict)

    def build(self) -> tuple[Cluster, JobTable, TableThroughput]:
        cluster = load_cluster(self.cluster)
        if self.workload != "generate" and is_pollux_workload(self.workload):
            table, goodput_oracle = read_goodput_workload(self.workload)
            return cluster, table, goodput_oracle if not self.throughputs else _oracle(self.throughputs, cluster)
        oracle = _oracle(self.throughputs, cluster)
        if self.workload == "generate":
            table = generate_workload(self.jobs, self.load, self.seed, sizes=self.sizes,
                                      durations=self.durations, throughput=oracle)
        else:
            path = Path(self.workload)
            if not path.exists():
                raise ConfigError(f"workload file {path} does not exist")
            table = JobTable.read(path)
        return cluster, table, oracle

    def run(self, built=None) -> dict[str, SimResult]:
        cluster, table, oracle = built if built is not None else self.build()
        config = EngineConfig(round_s=self.round_s, restart_delay_s=self.restart_delay_s,
                              progress=self.progress)
        results = {}
        for name in self.policies:
            params = {"placement": self.placement, **self.policy_params.get(name, {})}
            policy = get_policy(name, **params)
            results[name] = simulate(cluster, table, policy, oracle, config)
        return results


def _oracle(path: str | None, cluster: Cluster):
    """The built-in table; "replay" (every trace job runs exactly its recorded time, see
    sim.traces.replaying); a Gavel-format throughput JSON; or a calib.toml of fitted models."""
    if not path:
        return TableThroughput.builtin()
    if path == "replay":
        from .traces.replaying import replay_oracle
        return replay_oracle(cluster)
    if str(path).endswith(".toml"):
        from .calibration.oracle import CalibratedThroughput
        return CalibratedThroughput.from_toml(path)
    return TableThroughput.from_gavel_json(path)


def write_outputs(results: dict[str, SimResult], outdir: Path, scenario: Scenario) -> dict:
    """DIR/summary.json, DIR/<policy>/jobs.parquet and PNG plots."""
    from .metrics import summary, write_jobs
    from .plots import write_plots

    outdir.mkdir(parents=True, exist_ok=True)
    summaries = {name: summary(res) for name, res in results.items()}
    for name, res in results.items():
        (outdir / name).mkdir(exist_ok=True)
        write_jobs(res, outdir / name / "jobs.parquet")
    write_plots(results, outdir)
    doc = {"scenario": {k: v for k, v in vars(scenario).items() if k != "progress"},
           "policies": summaries}
    (outdir / "summary.json").write_text(json.dumps(jsonable(summaries), indent=2, sort_keys=True))
    (outdir / "scenario.json").write_text(json.dumps(jsonable(doc["scenario"]), indent=2, sort_keys=True))
    return summaries


def jsonable(x):
    """``x`` with numpy scalars as Python numbers and non-finite floats as None (for JSON)."""
    import numpy as np

    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x
