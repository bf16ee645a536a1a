"""asv benchmark of the Gymnasium environment (sim.gym): agent steps per second at 64 and 1,024
nodes (8 GPUs each).

Run: ``cd benchmarks && asv run --python=same --bench bench_gym`` (asv.conf.json), or
``python benchmarks/bench_gym.py`` to print the figures once.

One episode of 5,000 Gavel-generated jobs offered at about 1.5 times what the cluster serves
(3,000 jobs/h at 64 nodes, 48,000 at 1,024), so jobs queue and every step is a choice; the agent
takes the first legal action (``info["action_mask"].argmax()``: FIFO with backfill), so the
figure is the environment's cost, not an agent's.  ``track_steps_per_second``: steps / wall time
of the episode after ``reset`` (workload generation is not a step).  Needs gymnasium.
"""
from __future__ import annotations

import time

JOBS = 5000
LOAD_PER_NODE = 3000.0 / 64          # jobs per hour per node
NODES = [64, 1024]


class GymSteps:
    params = [NODES]
    param_names = ["nodes"]
    timeout = 300

    def setup(self, nodes):
        from sim.gym import ClusterEnv
        self.env = ClusterEnv(f"uniform:nodes={nodes},gpus=8", jobs=JOBS, load=LOAD_PER_NODE * nodes)
        self.env.reset(seed=0)           # compile and warm the caches outside the timing

    def track_steps_per_second(self, nodes):
        env = self.env
        obs, info = env.reset(seed=0)
        steps, over = 0, False
        t0 = time.perf_counter()
        while not over:
            obs, reward, terminated, truncated, info = env.step(int(info["action_mask"].argmax()))
            steps, over = steps + 1, terminated or truncated
        return steps / (time.perf_counter() - t0)

    track_steps_per_second.unit = "steps/s"


def _once() -> None:
    for nodes in NODES:
        b = GymSteps()
        b.setup(nodes)
        rates = [b.track_steps_per_second(nodes) for _ in range(3)]
        print(f"gym: {nodes:5d} nodes: {max(rates):,.0f} steps/s (best of 3; "
              f"{', '.join(f'{r:,.0f}' for r in rates)})")


if __name__ == "__main__":
    _once()
