"""Scheduling policies, registered by name.

``get_policy("fifo")`` builds one; ``list_policies()`` says what exists.  To add
a policy, put a module in this package with a :class:`sim.policies.base.Policy`
subclass that has a ``name`` and is decorated with :func:`register`; the registry
(:mod:`sim.policies.registry`) finds the module by itself (see ARCHITECTURE.md).  Policies
outside the package come from a file (:func:`load_policy_file`) or from installed packages
(entry points of the group ``clustersim.policies``).
"""
from __future__ import annotations

from .base import Policy
from .registry import get_policy, list_policies, load_policy_file, register

__all__ = ["Policy", "register", "get_policy", "list_policies", "load_policy_file"]
