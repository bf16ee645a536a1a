"""Targets of issue 3: batched normalized entropy, C kernel vs numpy vs torch vs Numba.

For float32 logits at (N, C) = (1e6, 10), (1e5, 1000), (2e4, 32000), in one run:
  * C vs the best numpy formulation (stable log-softmax form H = log s - sum(d e)/s):
    target >= 8x for C >= 1000, >= 4x for C = 10;
  * C vs torch's CPU log_softmax formulation (when torch is installed): faster;
  * C read rate vs a memory-read bandwidth probe at (2e4, 32000): >= 60%;
  * Numba within 2x of C.
All implementations of a shape are timed in the same interleaved rounds (best of
--repeat); the probe is timed right after them on the same array.
Prints a table and the ratios; --out writes the rows as Parquet.

    python scalability/bench_entropy.py [--scale 1.0] [--repeat 3] [--out out/bench_entropy.parquet]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim import entropy as E  # noqa: E402

SHAPES = [(1_000_000, 10), (100_000, 1000), (20_000, 32000)]


def numpy_best(x: np.ndarray) -> np.ndarray:
    """The stable log-softmax entropy in numpy, with as few passes as we found."""
    m = x.max(axis=1, keepdims=True)
    d = np.subtract(x, m)
    e = np.exp(d)
    s = e.sum(axis=1)
    t = np.einsum("ij,ij->i", d, e)
    return (np.log(s) - t / s) / math.log(x.shape[1])


def numpy_logsoftmax(x: np.ndarray) -> np.ndarray:
    """The textbook form: log p = d - log s, H = -sum p log p."""
    m = x.max(axis=1, keepdims=True)
    d = x - m
    logp = d - np.log(np.exp(d).sum(axis=1, keepdims=True))
    return -(np.exp(logp) * logp).sum(axis=1) / math.log(x.shape[1])


def best_time(fn, repeat: int) -> float:
    fn()  # warm up (and compile)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def interleaved_best(fns: dict, repeat: int, warm: set) -> dict:
    """Best-of-``repeat`` per implementation, timed in interleaved rounds (C, Numba,
    numpy, torch, C, Numba, ...) so a change of machine load hits all of them alike.
    Only the names in ``warm`` get an untimed warm-up call (compilation, first touch);
    the slow baselines have nothing to warm up, and their first call counts as a
    sample (a min over more samples can only favour them)."""
    for name in warm:
        fns[name]()
    ts = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            ts[name].append(time.perf_counter() - t0)
    return {name: min(v) for name, v in ts.items()}


def bandwidth_probe(x: np.ndarray, repeat: int) -> tuple[float, str]:
    """Memory-read GB/s: the best of numpy's sum (1 thread) and a parallel Numba sum."""
    import numba
    from numba import njit, prange

    @njit(parallel=True, fastmath=True)
    def psum(a):
        n = a.size
        chunks = 64
        acc = np.zeros(chunks, np.float32)
        for c in prange(chunks):
            s = np.float32(0)
            for i in range(c * n // chunks, (c + 1) * n // chunks):
                s += a[i]
            acc[c] = s
        return acc.sum()

    flat = x.reshape(-1)
    t_np = best_time(lambda: flat.sum(), repeat)
    t_nb = best_time(lambda: psum(flat), repeat)
    gb_np, gb_nb = x.nbytes / t_np / 1e9, x.nbytes / t_nb / 1e9
    how = f"numpy sum {gb_np:.2f} GB/s, numba parallel sum ({numba.get_num_threads()} thr) {gb_nb:.2f} GB/s"
    return max(gb_np, gb_nb), how


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="entropy kernel targets (issue 3)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply N by this (quick runs)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        import torch
        torch.set_num_threads(E.lib.sk_entropy_max_threads())
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    print(f"C kernel: AVX2 path = {E.simd_level()}, threads = {E.lib.sk_entropy_max_threads()}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs at start")
    rows = []
    for n, c in SHAPES:
        n = max(1, int(n * args.scale))
        x = (rng.standard_normal((n, c), dtype=np.float32) * 3)
        ref = numpy_best(x[:64])
        for impl in ("c", "numba"):
            assert np.allclose(E.normalized_entropy(x[:64], impl=impl), ref, rtol=1e-4, atol=1e-6)
        r = {"N": n, "C": c}
        fns = {"c": lambda: E.normalized_entropy(x, impl="c"),
               "numba": lambda: E.normalized_entropy(x, impl="numba"),
               "numpy_best": lambda: numpy_best(x),
               "numpy_logsoftmax": lambda: numpy_logsoftmax(x)}
        if torch is not None:
            tx = torch.from_numpy(x)

            def torch_entropy():
                lp = torch.log_softmax(tx, dim=1)
                return -(lp.exp() * lp).sum(dim=1) / math.log(c)
            fns["torch"] = torch_entropy
        r.update(interleaved_best(fns, args.repeat, warm={"c", "numba"}))
        r["numpy"] = min(r["numpy_best"], r["numpy_logsoftmax"])
        if c == 32000:
            r["probe_GBps"], r["probe_how"] = bandwidth_probe(x, args.repeat)
        rows.append(r)
        del x

    print()
    hdr = f"{'N':>9} {'C':>6} | {'C s':>8} {'Gel/s':>6} {'GB/s':>6} | {'numba s':>8} | {'numpy s':>8} | {'torch s':>8}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        el = r["N"] * r["C"]
        ts = f"{r['torch']:8.4f}" if "torch" in r else f"{'-':>8}"
        print(f"{r['N']:>9} {r['C']:>6} | {r['c']:8.4f} {el / r['c'] / 1e9:6.2f} "
              f"{4 * el / r['c'] / 1e9:6.2f} | {r['numba']:8.4f} | {r['numpy']:8.4f} | {ts}")
    print()
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    print("ratios (target in brackets):")
    for r in rows:
        need = 4.0 if r["C"] < 1000 else 8.0
        sp = r["numpy"] / r["c"]
        line = (f"  ({r['N']}, {r['C']}): numpy/C = {sp:5.1f}x [>= {need:.0f}x: "
                f"{'ok' if sp >= need else 'MISS'}]  numba/C = {r['numba'] / r['c']:4.2f} "
                f"[<= 2: {'ok' if r['numba'] <= 2 * r['c'] else 'MISS'}]")
        if "torch" in r:
            tr = r["torch"] / r["c"]
            line += f"  torch/C = {tr:4.1f}x [> 1: {'ok' if tr > 1 else 'MISS'}]"
        print(line)
        if "probe_GBps" in r:
            rate = 4 * r["N"] * r["C"] / r["c"] / 1e9
            frac = rate / r["probe_GBps"]
            print(f"  ({r['N']}, {r['C']}): C reads {rate:.2f} GB/s = {100 * frac:.0f}% of the probe "
                  f"{r['probe_GBps']:.2f} GB/s [>= 60%: {'ok' if frac >= 0.6 else 'MISS'}] "
                  f"({r['probe_how']})")
    if args.out:
        import pyarrow as pa
        import pyarrow.parquet as pq
        args.out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
