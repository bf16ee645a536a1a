"""Proof that the micro controller keeps synchronous data-parallel training correct.

A small MLP (64-48-10, numpy, hand-written backprop) learns scikit-learn's digits with K
simulated workers of unequal speed and unequal data difficulty (worker k sees its
samples with Gaussian pixel noise sigma_k).  Every step, worker k computes the gradient
of its b_k samples; the global gradient is sum_k (b_k / B) * mean_k, the exact mean over
the global batch B, so synchronous SGD stays unbiased whatever the controller does.  At
each epoch boundary the per-worker mean normalized entropy of the training logits
(sim.entropy.grouped_mean_entropy, one call per epoch) goes to sim.micro.MicroController,
which sets the next epoch's shards, batch sizes and learning rate.  The controller off
(enabled=False) is the uniform baseline.  Per-epoch entropy, weights, batch sizes, LR,
simulated time and test accuracy are logged to an Arrow IPC file.

    python examples/train_digits.py [--epochs 40] [--seeds 0 1 2] [--out out/train_digits.arrow]

Needs scikit-learn (for the data set).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.entropy import grouped_mean_entropy  # noqa: E402
from sim.micro import MicroConfig, MicroController  # noqa: E402

NOISE = (0.0, 2.0, 4.0, 8.0)     # per-worker pixel noise (digits pixels are 0..16)
SPEED = (1.0, 1.0, 0.7, 0.5)     # per-worker samples/time-unit factors
T_SYNC = 0.5                     # simulated all-reduce time per step


def load_digits_split(seed: int):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float32)
    return train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)


class MLP:
    def __init__(self, rng, n_in=64, n_hidden=48, n_out=10):
        self.W1 = (rng.standard_normal((n_in, n_hidden)) * np.sqrt(2.0 / n_in)).astype(np.float32)
        self.b1 = np.zeros(n_hidden, np.float32)
        self.W2 = (rng.standard_normal((n_hidden, n_out)) * np.sqrt(1.0 / n_hidden)).astype(np.float32)
        self.b2 = np.zeros(n_out, np.float32)

    def params(self):
        return [self.W1, self.b1, self.W2, self.b2]

    def forward(self, X):
        a = X @ self.W1 + self.b1
        h = np.maximum(a, 0)
        return h @ self.W2 + self.b2, (X, a, h)

    def grad_sum(self, X, y):
        """Logits and the SUM over the samples of the cross-entropy gradient."""
        z, (X, a, h) = self.forward(X)
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(y)), y] -= 1.0
        gW2 = h.T @ p
        gb2 = p.sum(axis=0)
        dh = (p @ self.W2.T) * (a > 0)
        return z, [X.T @ dh, dh.sum(axis=0), gW2, gb2]

    def accuracy(self, X, y):
        return float((self.forward(X)[0].argmax(axis=1) == y).mean())


def run(seed: int, controller: bool, epochs: int = 30, K: int = 4, global_batch: int = 64,
        lr: float = 0.3, data=None, config: MicroConfig | None = None):
    """Train once; returns (final test accuracy, list of per-epoch log rows)."""
    Xtr, Xte, ytr, yte = data if data is not None else load_digits_split(seed)
    Xtr = Xtr / 16.0
    Xte = Xte / 16.0
    rng = np.random.default_rng(seed)
    model = MLP(rng)
    cfg = config or MicroConfig()
    ctl = MicroController(K, global_batch, lr, MicroConfig(**{**cfg.__dict__, "enabled": controller}),
                          seed=seed)
    noise = np.asarray(NOISE[:K], dtype=np.float32) / 16.0
    speed = np.asarray(SPEED[:K])
    D = len(ytr)
    steps = D // global_batch
    sim_time = 0.0
    rows = []
    for epoch in range(epochs):
        shards = ctl.shards(D, epoch)
        b = ctl.batch_sizes
        cursors = [0] * K
        logit_chunks, owner = [], []
        for _ in range(steps):
            grads = [np.zeros_like(p) for p in model.params()]
            for k in range(K):
                if b[k] == 0 or len(shards[k]) == 0:
                    continue
                take = np.take(shards[k], np.arange(cursors[k], cursors[k] + b[k]), mode="wrap")
                cursors[k] += b[k]
                Xk = Xtr[take] + rng.standard_normal((b[k], Xtr.shape[1])).astype(np.float32) * noise[k]
                z, g = model.grad_sum(Xk, ytr[take])
                for acc, gi in zip(grads, g):
                    acc += gi                      # sum_k b_k * mean_k
                logit_chunks.append(z)
                owner.append(np.full(len(take), k))
            for p, g in zip(model.params(), grads):
                p -= (ctl.lr / global_batch) * g   # the global-batch mean gradient
            sim_time += float(np.max(b / speed)) + T_SYNC
        logits = np.concatenate(logit_chunks).astype(np.float32)
        u = grouped_mean_entropy(logits, np.concatenate(owner), n_groups=K)
        used_lr = ctl.lr
        used_b = ctl.batch_sizes.copy()
        used_w = ctl.weights.copy()
        ctl.update(u)
        acc = model.accuracy(Xte, yte)
        for k in range(K):
            rows.append(dict(seed=seed, controller=controller, epoch=epoch, worker=k,
                             entropy=float(u[k]), ubar=float(ctl.ubar[k]), weight=float(used_w[k]),
                             batch=int(used_b[k]), shard=int(len(shards[k])), lr=float(used_lr),
                             sim_time=sim_time, test_acc=acc))
    return model.accuracy(Xte, yte), rows


def write_log(rows, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=Path("out/train_digits.arrow"))
    args = ap.parse_args(argv)
    all_rows = []
    print(f"{'seed':>4} {'off':>7} {'on':>7} {'on-off (pp)':>12}")
    worst = np.inf
    for seed in args.seeds:
        data = load_digits_split(seed)
        acc_off, rows_off = run(seed, False, args.epochs, data=data)
        acc_on, rows_on = run(seed, True, args.epochs, data=data)
        all_rows += rows_off + rows_on
        diff = 100 * (acc_on - acc_off)
        worst = min(worst, diff)
        print(f"{seed:>4} {acc_off:7.4f} {acc_on:7.4f} {diff:12.2f}")
    write_log(all_rows, args.out)
    print(f"log: {args.out} ({len(all_rows)} rows)")
    ok = worst >= -1.0
    print("PASS: controller within 1 pp of the baseline or better" if ok else
          "FAIL: controller more than 1 pp below the baseline")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
