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
from .fsio import atomic_write_text, ensure_out_dir
from .goodput.workload import PROFILE_KINDS, is_pollux_workload, profile_kind, read_goodput_workload
from .jobs import JobTable
from .learning.workload import learning_workload, learning_world
from .limits import clip
from .policies import get_policy
from .presets import load_cluster
from .placement import DEFAULT_TYPE_CHOICE
from .throughput import TableThroughput
from .workload import generate_workload

DEFAULT_CLUSTER = "gavel-108"
DEFAULT_JOBS = 300
DEFAULT_LOAD = 6.0
DEFAULT_POLICIES = ("fifo", "sjf", "srtf", "las", "tiresias")


@dataclass
class Scenario:
    cluster: str = DEFAULT_CLUSTER
    workload: str = "generate"            # "generate" or a file in any job-trace format
    trace_format: str | None = None       # the workload file's format (None: detected)
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
    type_choice: str = DEFAULT_TYPE_CHOICE  # EngineConfig.type_choice (seeded by ``seed``)
    multi_server: str = "measured"        # TableThroughput's multi-server rate rule ("gavel": Gavel's)
    skip_invalid: bool = False            # drop (and count) jobs that cannot run, else an error
    progress: bool = False
    policy_params: dict = field(default_factory=dict)   # policy name -> {parameter: value}
    #: time-to-accuracy jobs, each policy run with the learning simulator (sim.learning): with
    #: ``workload="generate"`` the EGHS experiment's workload (sim.learning.workload: elastic
    #: jobs with learning profiles and user budgets); else a canonical job table's jobs, whose
    #: ``budget_iterations`` column gives the user budgets (drawn where it is empty)
    learning: bool = False
    #: network interference slowdown of a Pollux/Sia workload (GoodputOracle.interference)
    interference: float = 0.0
    #: which shared profiles a Pollux/Sia workload runs with, "pollux" or "sia" (None: "sia" for a
    #: file under a folder named sia, else "pollux": sim.goodput.workload.profile_kind)
    goodput_profiles: str | None = None
    #: a job's first start pays its restart delay too (EngineConfig.first_start_delay; None:
    #: each policy's own, on for the goodput family)
    first_start_delay: bool | None = None
    #: rounds at round_origin + k round_s (EngineConfig.round_origin; None: the policy's own,
    #: else phased from the first arrival)
    round_origin: float | None = None

    def __post_init__(self):
        if self.learning and self.workload != "generate" and self.trace_format not in (None, "jobs"):
            self._not_for_learning(self.trace_format)
        goodput_options = (("--interference", self.interference), ("--goodput-profiles", self.goodput_profiles))
        for option, value in goodput_options:
            if value and not self.goodput_workload():
                raise ConfigError(f"{option} applies to Pollux/Sia workloads (goodput jobs), not "
                                  f"{clip(repr(self.workload))}")
        if self.goodput_profiles not in (None, *PROFILE_KINDS):
            raise ConfigError(f"--goodput-profiles must be one of {', '.join(PROFILE_KINDS)}, got "
                              f"{clip(repr(self.goodput_profiles))}")

    def goodput_workload(self) -> bool:
        """Is the workload a Pollux/Sia workload CSV (goodput jobs on their profiles)?"""
        return self.workload != "generate" and is_pollux_workload(self.workload)

    def goodput_profiles_chosen(self) -> tuple[str, str]:
        """(the profiles a goodput workload runs with, why: the option or the file's folder)."""
        if self.goodput_profiles:
            return self.goodput_profiles, "--goodput-profiles"
        kind = profile_kind(self.workload)
        return kind, "a folder named sia in its path" if kind == "sia" else "no folder named sia in its path"

    def _not_for_learning(self, fmt: str):
        raise ConfigError(f"--learning runs time-to-accuracy jobs of --workload generate or of a "
                          f"canonical job table (format 'jobs'), not {clip(repr(self.workload))} "
                          f"(format {fmt!r})")

    def build(self) -> tuple[Cluster, JobTable, TableThroughput]:
        """The cluster, the workload and the oracle.  A trace file runs its recorded run times
        (:func:`sim.traces.read_workload`) unless ``throughputs`` names an oracle."""
        cluster, table, oracle = self._build()
        if not self.goodput_workload():
            mixing = all(getattr(get_policy(p), "rate_model", None) is not None for p in self.policies)
            table = table.validate_against(cluster, skip_invalid=self.skip_invalid, oracle=oracle,
                                           mixing=mixing)
        return cluster, table, oracle

    def _build(self):
        cluster = load_cluster(self.cluster)
        if self.learning and self.workload != "generate":
            from .traces import detect_format
            fmt = self.trace_format or detect_format(self.workload)
            if fmt != "jobs":
                self._not_for_learning(fmt)
        if self.goodput_workload():
            table, goodput_oracle = read_goodput_workload(self.workload, interference=self.interference,
                                                          kind=self.goodput_profiles_chosen()[0])
            if self.throughputs:
                goodput_oracle = _oracle(self.throughputs, cluster, self.multi_server)
            return cluster, table, goodput_oracle
        if self.workload != "generate":
            from .traces import read_workload
            oracle = _oracle(self.throughputs, cluster, self.multi_server) if self.throughputs else None
            table, oracle = read_workload(Path(self.workload), cluster, format=self.trace_format,
                                          oracle=oracle)
            return cluster, table, oracle
        oracle = _oracle(self.throughputs, cluster, self.multi_server)
        if self.learning:
            return cluster, learning_workload(self.jobs, self.load, self.seed, oracle, sizes=self.sizes,
                                              durations=self.durations), oracle
        table = generate_workload(self.jobs, self.load, self.seed, sizes=self.sizes,
                                  durations=self.durations, throughput=oracle)
        return cluster, table, oracle

    def make_policies(self) -> dict:
        """Name -> a new policy instance with its parameters; a parameter of a policy not
        run, or one the policy does not take, is a ConfigError before anything runs."""
        stray = sorted(set(self.policy_params) - set(self.policies))
        if stray:
            raise ConfigError(f"parameters given for {', '.join(stray)}, which is not among the "
                              f"policies run ({', '.join(self.policies)})")
        return {name: get_policy(name, **{"placement": self.placement,
                                          **self.policy_params.get(name, {})})
                for name in self.policies}

    def engine_config(self) -> EngineConfig:
        """The run's engine settings, validated (round period, restart delay)."""
        return EngineConfig(round_s=self.round_s, restart_delay_s=self.restart_delay_s,
                            progress=self.progress, type_choice=self.type_choice,
                            type_seed=int(self.seed), first_start_delay=self.first_start_delay,
                            round_origin=self.round_origin)

    def run(self, built=None, on_result=None) -> dict[str, SimResult]:
        """Run every policy; ``on_result(name, result)`` is called as each one finishes."""
        config = self.engine_config()
        policies = self.make_policies()
        cluster, table, oracle = built if built is not None else self.build()
        results = {}
        for name, policy in policies.items():
            world = learning_world(table, oracle, self.seed) if self.learning else None
            results[name] = simulate(cluster, table, policy, oracle, config, learning=world)
            if on_result is not None:
                on_result(name, results[name])
        return results


def _oracle(path: str | None, cluster: Cluster, multi_server: str = "measured"):
    """The built-in table; "replay" (every trace job runs exactly its recorded time, see
    sim.traces.replaying); a Gavel-format throughput JSON; or a calib.toml of fitted models.
    ``multi_server``: the tables' rule for placements over several servers."""
    if not path:
        return TableThroughput.builtin(multi_server=multi_server)
    if path == "replay":
        from .traces.replaying import replay_oracle
        return replay_oracle(cluster)
    if str(path).endswith(".toml"):
        from .calibration.oracle import CalibratedThroughput
        return CalibratedThroughput.from_toml(path)
    return TableThroughput.from_gavel_json(path, multi_server=multi_server)


class OutputWriter:
    """Writes a scenario's results into ``outdir`` as each policy finishes: its
    ``<policy>/jobs.parquet`` and ``summary.json`` (all policies so far), then the plots at the
    end.  The folder is checked before anything runs; every file is written atomically, so a
    failing disk loses at most the policy in flight."""

    def __init__(self, outdir: Path, scenario: Scenario):
        self.outdir = ensure_out_dir(outdir)
        self.summaries: dict = {}
        atomic_write_text(self.outdir / "scenario.json", _json_text(
            {k: v for k, v in vars(scenario).items() if k != "progress"}))

    def add(self, name: str, result: SimResult) -> None:
        from .metrics import summary, write_jobs

        self.summaries[name] = summary(result)
        write_jobs(result, self.outdir / name / "jobs.parquet")
        atomic_write_text(self.outdir / "summary.json", _json_text(self.summaries))

    def finish(self, results: dict[str, SimResult]) -> dict:
        from .plots import write_plots

        if results:
            write_plots(results, self.outdir)
        return self.summaries


def write_outputs(results: dict[str, SimResult], outdir: Path, scenario: Scenario) -> dict:
    """DIR/summary.json, DIR/<policy>/jobs.parquet and PNG plots (see :class:`OutputWriter`)."""
    writer = OutputWriter(Path(outdir), scenario)
    for name, res in results.items():
        writer.add(name, res)
    return writer.finish(results)


def _json_text(doc) -> str:
    return json.dumps(jsonable(doc), indent=2, sort_keys=True)


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
