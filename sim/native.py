"""Native policies: the built-in rigid policies decided inside the C event kernel.

A policy whose class names a native kernel (``Policy.native``: FIFO, SJF, SRTF, LAS,
Tiresias) and whose settings have a native form (``Policy.native_params``) runs through
``sk_native_run`` (csrc/sk_native.c): the kernel decides every decision point itself
and returns to Python only when its record buffer is full, when it needs rates for
placement summaries it has not seen (the throughput oracle is asked once per distinct
summary), after :data:`YIELD_S` seconds of a call (so that Ctrl-C is seen within about that
time; the results do not depend on it), and at the end.  The decisions are the Python policies' own, job by job
(tests/test_native_policies.py); ``EngineConfig(native=False)`` forces the Python path.
"""
from __future__ import annotations

import time

import numpy as np

from ._native import DecisionRecords, as_cdata, ffi, lib
from .errors import SimError
from .placement import allowed_masks

KINDS = {"fifo": lib.SK_POL_FIFO, "sjf": lib.SK_POL_SJF, "srtf": lib.SK_POL_SRTF,
         "las": lib.SK_POL_LAS, "tiresias": lib.SK_POL_TIRESIAS}
SPREAD = {"consolidated": 0, "spread": 1}
_CTYPE = {"<i8": "int64_t[]", "<i4": "int32_t[]", "<f8": "double[]"}
#: decision points recorded per return to Python
RECORD_ROWS = 1 << 16
#: wall seconds a call of the kernel runs at most before it returns to Python (signals)
YIELD_S = 0.1


def native_params(policy) -> dict | None:
    """The native form of ``policy`` (kind, placement, flags, parameters) or None."""
    kind = getattr(policy, "native", None)
    if kind not in KINDS or getattr(policy, "placement", None) not in SPREAD:
        return None
    params = policy.native_params()
    if params is None:
        return None
    return {"kind": KINDS[kind], "spread": SPREAD[policy.placement],
            "preemptive": bool(policy.preemptive), "blocking": bool(policy.blocking),
            "skip_if_nothing_fits": bool(policy.skip_if_nothing_fits),
            "skip_idle_completions": bool(policy.skip_idle_completions),
            "place_lone_arrivals": bool(policy.place_lone_arrivals), **params}


class NativeRun:
    """Drives one kernel with a native policy installed; collects its records.

    check_plans: apply each plan through ``sk_engine_apply``'s validation, in job-id order,
    instead of as the kernel built it (tests hold the two to the same results).
    """

    check_plans = False

    def __init__(self, kernel, cluster, jobs, oracle, params: dict, fgd_weights: np.ndarray,
                 policy_name: str):
        self.kernel, self.cluster, self.jobs, self.oracle = kernel, cluster, jobs, oracle
        self.name = policy_name
        self.oracle_s = 0.0
        self.kernel_calls = 0          # calls of sk_native_run (returns to Python)
        self._install(params, fgd_weights)
        self._records = DecisionRecords(RECORD_ROWS)

    def _install(self, params: dict, fgd_weights: np.ndarray) -> None:
        c, jobs = self.cluster, self.jobs
        rates = np.ascontiguousarray(jobs.type_rates, float)
        # one waiting heap per (request, allowed types), in increasing request order
        keys = np.column_stack([np.asarray(jobs.demand, np.int64), allowed_masks(rates)])
        demands, bucket = np.unique(keys, axis=0, return_inverse=True)
        bucket = np.asarray(bucket).reshape(-1)
        thr = np.ascontiguousarray(params.get("thresholds", np.zeros(0)), float)
        weights = np.ascontiguousarray(fgd_weights, float)
        self._keep = [np.ascontiguousarray(jobs.model, np.int32), np.ascontiguousarray(jobs.est_duration, float),
                      np.ascontiguousarray(bucket, np.int32), np.ascontiguousarray(c.node_type, np.int32),
                      np.ascontiguousarray(c.node_speed, float), weights, thr, rates]
        spec = ffi.new("sk_policy_spec *")
        for key in ("kind", "spread", "preemptive", "blocking", "skip_if_nothing_fits",
                    "skip_idle_completions", "place_lone_arrivals"):
            setattr(spec, key, int(params[key]))
        spec.n_thresholds = thr.size
        spec.thresholds = as_cdata("double *", thr)
        spec.rel_tol = float(params.get("rel_tol", 0.0))
        spec.lease_s = float(params.get("lease_s", 0.0))
        spec.check_plans = int(self.check_plans)
        inp = ffi.new("sk_native_inputs *")
        inp.model, inp.est_duration, inp.bucket = (as_cdata("int32_t *", self._keep[0]),
                                                   as_cdata("double *", self._keep[1]),
                                                   as_cdata("int32_t *", self._keep[2]))
        inp.n_buckets = max(len(demands), 1)
        inp.node_type = as_cdata("int32_t *", self._keep[3])
        inp.node_speed = as_cdata("double *", self._keep[4])
        inp.n_types = len(c.gpu_types)
        inp.fgd_weights = as_cdata("double *", weights)
        inp.fgd_width = weights.shape[1]
        inp.type_rate = as_cdata("double *", rates)
        inp.type_choice = int(params.get("type_choice", 0))
        inp.type_seed = int(params.get("type_seed", 0))
        self.kernel._check(lib.sk_native_set_policy(self.kernel.ptr, spec, inp), "sk_native_set_policy")
        self.kernel._check(lib.sk_native_set_yield(self.kernel.ptr, YIELD_S), "sk_native_set_yield")

    def run(self) -> None:
        k = self.kernel
        while True:
            rc = lib.sk_native_run(k.ptr, self._records.struct)
            self.kernel_calls += 1
            if rc == lib.SK_ESTALL:
                msg = ffi.string(lib.sk_engine_message(k.ptr)).decode()
                raise SimError(f"policy {self.name}: {msg}")
            k._check(rc, "sk_native_run")
            if rc == lib.SK_NEED_RATES:
                self._put_rates()
                continue
            if rc == lib.SK_YIELD:            # back in Python: a pending Ctrl-C raises here
                continue
            self._records.drain()
            if rc == lib.SK_DONE:
                return

    def _put_rates(self) -> None:
        """Ask the oracle for the placement summaries the kernel has not seen."""
        t0 = time.perf_counter()
        k, n_missing = self.kernel, ffi.new("int64_t *")
        lib.sk_native_missing(k.ptr, 0, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL,
                              n_missing)
        n = n_missing[0]
        job, model = np.empty(n, np.int64), np.empty(n, np.int32)
        ngpu, nn = np.empty(n, np.int32), np.empty(n, np.int32)
        mask, speed = np.empty(n, np.int64), np.empty(n)
        bufs = [ffi.from_buffer(_CTYPE[a.dtype.str], a) for a in (job, model, ngpu, nn, mask, speed)]
        k._check(lib.sk_native_missing(k.ptr, n, *bufs, n_missing), "sk_native_missing")
        rates = np.asarray(self.oracle.rates(model, ngpu.astype(np.int64), nn.astype(np.int64), mask,
                                             speed, self.cluster.gpu_types), float)
        bad = np.flatnonzero(~(rates > 0))
        if bad.size:
            i = int(bad[0])
            types = [t for b, t in enumerate(self.cluster.gpu_types) if (int(mask[i]) >> b) & 1]
            raise SimError(f"policy {self.name} placed job {int(job[i])} at t={lib.sk_engine_now(k.ptr)} on GPU "
                           f"types {'|'.join(types)} where its throughput is 0 (the model cannot "
                           f"run there)")
        rates = np.ascontiguousarray(rates)
        k._check(lib.sk_native_put_rates(k.ptr, n, ffi.from_buffer("double[]", rates)),
                 "sk_native_put_rates")
        self.oracle_s += time.perf_counter() - t0

    # -- results -----------------------------------------------------------------------
    def records(self) -> dict[str, np.ndarray]:
        return self._records.records()

    def counters(self) -> dict:
        c = ffi.new("sk_native_counters *")
        self.kernel._check(lib.sk_native_counters_get(self.kernel.ptr, c), "sk_native_counters_get")
        return {"decisions": c.decisions, "skipped": c.skipped, "lone_placed": c.lone_placed,
                "placements": c.placements, "preemptions": c.preemptions,
                "rate_misses": c.rate_misses, "decide_seconds": c.decide_seconds}

    def used_types(self) -> np.ndarray:
        out = np.zeros(max(self.kernel.n, 1), np.int64)
        self.kernel._check(lib.sk_native_used_types(self.kernel.ptr, ffi.from_buffer("int64_t[]", out)),
                           "sk_native_used_types")
        return out[: self.kernel.n]
