"""How fast is the one simulator? Ops per second on large synthetic training graphs.

Run: .venv/bin/python bench/simulate.py
"""

from __future__ import annotations

import time

from remat_core import checkpoint_all_peak, simulate
from remat_core.graph import random_dag, training_chain
from remat_core.schedule import checkpoint_all_ops


def main() -> None:
    print(f"{'graph':<28} {'nodes':>7} {'ops':>8} {'simulate ms':>12} {'Mops/s':>8} {'ckpt-all ms':>12}")
    for graph in (training_chain(2000), training_chain(10000), random_dag(3000, edge_probability=0.002, seed=1)):
        ops, _ = checkpoint_all_ops(graph, explain=False)
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            simulate(graph, ops)
            runs.append(time.perf_counter() - started)
        best = min(runs)
        started = time.perf_counter()
        checkpoint_all_peak(graph)
        build = time.perf_counter() - started
        print(f"{graph.name:<28} {len(graph):>7} {len(ops):>8} {best * 1e3:>12.2f} {len(ops) / best / 1e6:>8.2f} "
              f"{build * 1e3:>12.2f}")


if __name__ == "__main__":
    main()
