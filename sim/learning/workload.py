"""The EGHS experiment's workload (issue 16): elastic time-to-accuracy jobs with learning
profiles and user budgets, as ``clustersim run --workload generate --learning`` and
scalability/eghs_experiment.py generate it (docs/eghs.md).

* jobs: Gavel's generator (:func:`sim.workload.generate_workload`: Poisson arrivals, Gavel's
  size mix and durations, or the options it is given) restricted to :data:`LEARNING_MODELS`,
  the distributed-capable models with learning profiles (ResNet-18 -> CIFAR-10, ResNet-50 ->
  ImageNet, Transformer -> BERT, LM -> DeepSpeech2); durations times ``duration_scale``
  (default :data:`DURATION_SCALE`, the experiment's);
* elastic: ``gpus_min = max(1, gpus // 2)``, ``gpus_max = 2 gpus`` around the generated request;
* learning (:func:`learning_spec`): every job a time-to-accuracy job with a quality target
  ``q ~ U(0.90, 0.97)`` (:data:`TTA_QUALITY`); its work is the generated duration's iterations at
  its requested size;
* budgets: the table's ``budget_iterations`` column, the user's budget, over-estimates that work
  by a factor ``1 + Exp(mean 0.5)`` (:func:`sim.learning.spec.budget_factors`, seeded by the
  workload's seed; the same values :attr:`~sim.learning.spec.LearningSpec.budget_factor` draws
  for a table without the column).  The truth lives in a
  :class:`sim.learning.world.LearningWorld` built from the spec, one per run.

Every choice is ours [I]; all draws are seeded by the run's seed.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..jobs import JobTable
from ..workload import generate_workload
from .spec import LearningSpec, budget_factors
from .world import LearningWorld

__all__ = ["LEARNING_MODELS", "TTA_QUALITY", "DURATION_SCALE", "learning_workload", "learning_spec",
           "learning_world"]

#: Gavel models with a learning profile that train distributed
LEARNING_MODELS = ("ResNet-18 (batch size 64)", "ResNet-50 (batch size 64)",
                   "Transformer (batch size 64)", "LM (batch size 20)")
#: range of the per-job quality target q (uniform), time-to-accuracy jobs
TTA_QUALITY = (0.90, 0.97)
#: generated durations are scaled by this: the experiment's choice, which keeps runs of
#: thousands of nodes short (docs/eghs.md, section 3)
DURATION_SCALE = 0.25


def learning_workload(n_jobs: int, load_jobs_per_hour: float, seed: int, oracle, *,
                      duration_scale: float = DURATION_SCALE, source: str | None = None, **generator) -> JobTable:
    """``n_jobs`` elastic jobs of :data:`LEARNING_MODELS` arriving at ``load_jobs_per_hour``
    (``generator``: further options of :func:`sim.workload.generate_workload`, e.g. ``sizes``),
    each with a user budget (module docstring)."""
    wl = generate_workload(n_jobs, load_jobs_per_hour, seed, models=list(LEARNING_MODELS),
                           throughput=oracle, **generator)
    t = wl.table
    g = t.column("gpus").to_numpy()
    t = t.set_column(t.schema.get_field_index("gpus_min"), "gpus_min",
                     pa.array(np.maximum(1, g // 2).astype(np.int32)))
    t = t.set_column(t.schema.get_field_index("gpus_max"), "gpus_max", pa.array((2 * g).astype(np.int32)))
    t = t.set_column(t.schema.get_field_index("duration_s"), "duration_s",
                     pa.array(t.column("duration_s").to_numpy() * duration_scale))
    jobs = JobTable.from_table(t, source or f"learning workload seed={seed}")
    return jobs.with_budgets(jobs.work_iterations(oracle) * budget_factors(len(jobs), seed))


def learning_spec(workload: JobTable, oracle, seed: int, trace=None) -> LearningSpec:
    """The learning facts of :func:`learning_workload`'s jobs: all time-to-accuracy, quality in
    :data:`TTA_QUALITY`, budgets, worker difficulties (seeded by ``seed``); ``trace``: a logits
    trace for the entropy signal instead of the surrogate."""
    return LearningSpec.for_workload(workload, oracle, mode="tta", quality=TTA_QUALITY, seed=seed,
                                     trace=trace)


def learning_world(workload: JobTable, oracle, seed: int, trace=None) -> LearningWorld:
    """A fresh learning simulator for one run over ``workload`` (it holds the run's state)."""
    return LearningWorld(learning_spec(workload, oracle, seed, trace))
