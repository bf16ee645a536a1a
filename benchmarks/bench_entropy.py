"""asv micro-benchmarks of sim.entropy (kernel tier).  Sizes are small so a run is quick;
the full-size targets live in scalability/bench_entropy.py."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from sim import entropy as E


class NormalizedEntropy:
    params = (["c", "numba"], [(100_000, 10), (10_000, 1000), (500, 32000)])
    param_names = ["impl", "shape"]

    def setup(self, impl, shape):
        self.x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32) * 3
        E.normalized_entropy(self.x[:8], impl=impl)  # compile / warm up

    def time_normalized_entropy(self, impl, shape):
        E.normalized_entropy(self.x, impl=impl)


class GroupedMeanEntropy:
    params = (["c", "numba"],)
    param_names = ["impl"]

    def setup(self, impl):
        rng = np.random.default_rng(1)
        self.x = rng.standard_normal((200_000, 10), dtype=np.float32)
        self.g = rng.integers(0, 64, size=200_000)
        E.grouped_mean_entropy(self.x[:8], self.g[:8], impl=impl)

    def time_grouped_mean_entropy(self, impl):
        E.grouped_mean_entropy(self.x, self.g, impl=impl)


class ArrowInputs:
    def setup(self):
        x = np.random.default_rng(2).standard_normal((100_000, 100), dtype=np.float32)
        self.fsl = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 100)
        self.f16 = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1).astype(np.float16)), 100)
        self.chunked = pa.chunked_array([self.fsl.slice(0, 50_000), self.fsl.slice(50_000)])

    def time_fixed_size_list_f32(self):
        E.normalized_entropy(self.fsl)

    def time_fixed_size_list_f16(self):
        E.normalized_entropy(self.f16)

    def time_chunked(self):
        E.normalized_entropy(self.chunked)
