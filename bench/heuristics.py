"""How fast are the heuristic solvers? Solve times at single budgets and over 40-budget sweeps.

Run: PYTHONPATH=$PWD .venv/bin/python bench/heuristics.py [--graphs DIR] [--points 40] [--solvers a,b]

For each graph: the time of one solve at 70%, 50% and 30% of the checkpoint-all peak (the first
solve of a chain solver includes building its stage chain and table, which later budgets reuse),
and the total time of a sweep across ``--points`` budgets from the lower bound to the peak, which
is what the app runs to draw a Pareto curve. ``--graphs`` adds every ``*.json`` graph of a folder
(for example the Checkmate graphs in ../shared/graphs/checkmate).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from remat_core import ComputeGraph, InfeasibleBudget, checkpoint_all_peak, load_graph, solve
from remat_core.compare import sweep_budgets
from remat_core.generators import layered_training_chain, random_dag, training_chain

HEURISTICS = ("chen-sqrt", "chen-greedy", "griewank", "rotor", "dtr", "dtr-eq", "lru", "largest-first", "greedy-size")


def _graphs(folder: str | None) -> list[ComputeGraph]:
    import random
    rng = random.Random(0)
    n = 1000
    graphs = [training_chain(1000, mem=2**20),
              layered_training_chain([rng.randint(1, 64) * 2**16 for _ in range(n)],
                                     [float(rng.randint(1, 20)) for _ in range(n)], name="layered-chain-1000"),
              random_dag(2000, edge_probability=0.002, seed=1)]
    if folder:
        graphs += [load_graph(p) for p in sorted(Path(folder).glob("*_train_*.json"))]
    return graphs


def _time_solve(graph: ComputeGraph, solver: str, budget: int) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        schedule = solve(graph, budget, solver)
    except InfeasibleBudget:
        return time.perf_counter() - started, "infeasible"
    return time.perf_counter() - started, f"{schedule.stats['overhead']:+.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", help="folder of extra graph files")
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--solvers", default=",".join(HEURISTICS))
    args = parser.parse_args()
    solvers = args.solvers.split(",")
    print(f"{'graph':<36} {'nodes':>6} {'solver':<14} {'70%':>18} {'50%':>18} {'30%':>18} {'sweep s':>8}")
    for graph in _graphs(args.graphs):
        peak = checkpoint_all_peak(graph)
        for solver in solvers:
            cells = []
            for fraction in (0.7, 0.5, 0.3):
                seconds, result = _time_solve(graph, solver, int(peak * fraction))
                cells.append(f"{seconds * 1e3:7.1f}ms {result:>9}")
            started = time.perf_counter()
            for budget in sweep_budgets(graph, args.points):
                _time_solve(graph, solver, budget)
            sweep = time.perf_counter() - started
            print(f"{graph.name[:36]:<36} {len(graph):>6} {solver:<14} {cells[0]:>18} {cells[1]:>18} {cells[2]:>18} "
                  f"{sweep:8.2f}", flush=True)


if __name__ == "__main__":
    main()
