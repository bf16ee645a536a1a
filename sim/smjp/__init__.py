"""Sampling-based multi-job placement on heterogeneous workers (paper 2; docs/smjp.md).

* :mod:`~sim.smjp.gradients`: parameter counts per model (the all-reduce size);
* :mod:`~sim.smjp.latency`: proportional workload assignment + ring all-reduce, and the
  engine's rate model for SMJP placements (:class:`~sim.smjp.latency.ProportionalRates`);
* :mod:`~sim.smjp.instance`: a placement instance and its objective (average JCT, Jain);
* :mod:`~sim.smjp.categories`: enumeration and sampling of categories (workers per job);
* :mod:`~sim.smjp.market`: the ascending-price matching market, its exact check, packing and
  pairwise-swap local search;
* :mod:`~sim.smjp.sampling`: the sampling solver; :mod:`~sim.smjp.exact`: the exact MILP.

The policies ``smjp`` and ``smjp-exact`` are in sim/policies/smjp.py.
"""
from .exact import solve_exact
from .instance import Instance, jain
from .latency import LatencyModel, ProportionalRates
from .sampling import SamplingConfig, Solution, solve_sampling

__all__ = ["Instance", "LatencyModel", "ProportionalRates", "SamplingConfig", "Solution",
           "jain", "solve_exact", "solve_sampling"]
