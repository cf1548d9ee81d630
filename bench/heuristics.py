"""How fast are the heuristic solvers? Solve times at single budgets and over 40-budget sweeps.

Run: PYTHONPATH=$PWD .venv/bin/python bench/heuristics.py [--graphs PATH ...] [--no-generated] [--points 40]
     [--solvers a,b]

For each graph: the time of one solve at 70%, 50% and 30% of the checkpoint-all peak (the first
solve of a chain solver includes building its stage chain and table, which later budgets reuse),
and the total time of a sweep across ``--points`` budgets from the lower bound to the peak, which
is what the app runs to draw a Pareto curve. ``--graphs`` adds graph files, or every training
graph (``*_train_*.json``) of a folder such as the Checkmate graphs in ../shared/graphs/checkmate.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from remat_core import ComputeGraph, InfeasibleBudget, checkpoint_all_peak, load_graph, solve
from remat_core.analysis import sweep_budgets
from remat_core.graph import layered_training_chain, random_dag, training_chain

HEURISTICS = ("chen-sqrt", "chen-greedy", "griewank", "rotor", "dtr", "dtr-eq", "lru", "largest-first", "greedy-size")


def _generated() -> list[ComputeGraph]:
    rng = random.Random(0)
    n = 1000
    return [training_chain(n, mem=2**20),
            layered_training_chain([rng.randint(1, 64) * 2**16 for _ in range(n)],
                                   [float(rng.randint(1, 20)) for _ in range(n)], name="layered-chain-1000"),
            random_dag(2 * n, edge_probability=0.002, seed=1)]


def _files(paths: list[str]) -> list[ComputeGraph]:
    out = []
    for path in map(Path, paths):
        files = sorted(path.glob("*_train_*.json")) if path.is_dir() else [path]
        out += [load_graph(f) for f in files]
    return out


def _time_solve(graph: ComputeGraph, solver: str, budget: int) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        schedule = solve(graph, budget, solver)
    except InfeasibleBudget:
        return time.perf_counter() - started, "infeasible"
    return time.perf_counter() - started, f"{schedule.stats['overhead']:+.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="*", default=[], help="graph files or folders of training graphs")
    parser.add_argument("--no-generated", action="store_true", help="skip the generated 2,000-node graphs")
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--solvers", default=",".join(HEURISTICS))
    args = parser.parse_args()
    solvers = args.solvers.split(",")
    print(f"{'graph':<36} {'nodes':>6} {'solver':<14} {'70%':>18} {'50%':>18} {'30%':>18} {'sweep s':>8}")
    for graph in ([] if args.no_generated else _generated()) + _files(args.graphs):
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
