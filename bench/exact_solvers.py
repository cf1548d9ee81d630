"""checkmate-milp, checkmate-lp and moccasin on training graphs of tens to hundreds of nodes.

For every graph and every budget (a fraction of the checkpoint-all peak) each solver runs under the
same time limit through :func:`remat_core.solve` (so the simulator measures every cost), the MILP
and moccasin with ``any_order=False``: their fixed-order searches, without the heuristics' schedules
in other orders that they return by default when cheaper. Reported:
cost overhead over checkpoint-all, solve seconds, MIP gap, the LP lower bound, and moccasin against
the MILP *at equal cost*: the time each needed to first hold a schedule as cheap as the best one
either found (from the ``incumbents`` each solver records; both start from the same greedy
schedule, the MILP as its MIP start and moccasin as its hint).

Graphs: the generated branchy training graphs of ``bench/training_graphs.py`` and the Checkmate
training graphs in ``shared/graphs/checkmate/`` of the nearest folder above the checkout that has
one (or ``--checkmate-dir``) when that folder exists (read in place, never copied).

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/exact_solvers.py [--time-limit 60] [--fractions
0.7,0.5,0.3] [--graphs NAME,...] [--graph-file GRAPH.json] [--solvers checkmate-milp,moccasin]
[--max-nodes N] [--json out.json]``. A full run on 2 cores takes about an hour at 60 s per solve.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from remat_core import (ComputeGraph, InfeasibleBudget, RematError, checkpoint_all_cost, checkpoint_all_peak,
                        load_graph, memory_lower_bound, solve)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from training_graphs import benchmark_graphs  # noqa: E402 - the bench folder is not a package

CHECKMATE_GRAPHS = next((folder / "shared" / "graphs" / "checkmate" for folder in Path(__file__).resolve().parents
                         if (folder / "shared" / "graphs" / "checkmate").is_dir()), Path("shared/graphs/checkmate"))
SOLVERS = ("checkmate-lp", "checkmate-milp", "moccasin")


def graphs(selected: set[str] | None, checkmate_dir: Path, files: list[Path]) -> list[tuple[str, ComputeGraph]]:
    """``(label, graph)``: the generated graphs, the Checkmate training graphs if they are there, then
    the graph files given (always run, whatever ``selected`` says)."""
    found = [(g.name, g) for g in benchmark_graphs()]
    if checkmate_dir.is_dir():
        found += [(path.name.split("_MLSys")[0] + "-train", load_graph(path))
                  for path in sorted(checkmate_dir.glob("*_train_nx.json"))]
    chosen = [(label, g) for label, g in found if selected is None or label in selected]
    return chosen + [(path.stem, load_graph(path)) for path in files]


def run_one(graph: ComputeGraph, budget: int, solver: str, time_limit: float, max_nodes: int | None) -> dict:
    """One solve: measured cost and time, or why it failed."""
    started = time.perf_counter()
    options = {} if solver == "checkmate-lp" else {"any_order": False}  # the fixed-order search alone
    if max_nodes is not None and solver != "moccasin":
        options["max_nodes"] = max_nodes
    try:
        schedule = solve(graph, budget, solver, time_limit=time_limit, **options)
    except (InfeasibleBudget, RematError) as e:
        return {"solver": solver, "feasible": False, "seconds": time.perf_counter() - started, "why": str(e)}
    info = schedule.solver_info
    return {"solver": solver, "feasible": True, "seconds": schedule.stats["solve_seconds"],
            "cost": schedule.stats["cost"], "overhead": schedule.stats["overhead"], "peak": schedule.stats["peak"],
            "status": info.get("status"), "gap": info.get("mip_gap", info.get("gap")),
            "lp_lower_bound": info.get("lp_lower_bound"), "incumbents": info.get("incumbents"),
            "warm_start": info.get("warm_start"), "warm_start_cost": info.get("warm_start_cost")}


def time_to(incumbents: list | None, target: float) -> float | None:
    """Seconds until the first incumbent at most ``target`` (None: never)."""
    for seconds, objective in incumbents or ():
        if objective <= target * (1 + 1e-9) + 1e-9:
            return seconds
    return None


def equal_cost(milp: dict, moccasin: dict) -> dict | None:
    """Each solver's time to the best cost either found (None: not reached within the limit)."""
    if not (milp["feasible"] or moccasin["feasible"]):
        return None
    target = min(r["cost"] for r in (milp, moccasin) if r["feasible"])
    return {"target_cost": target, "milp_seconds": time_to(milp.get("incumbents"), target),
            "moccasin_seconds": time_to(moccasin.get("incumbents"), target)}


def fmt(value, spec: str = ".1f", missing: str = "-") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--fractions", default="0.7,0.5,0.3")
    parser.add_argument("--graphs", default=None, help="comma-separated graph names (default: all)")
    parser.add_argument("--solvers", default=",".join(SOLVERS),
                        help="comma-separated subset of " + ", ".join(SOLVERS))
    parser.add_argument("--max-nodes", type=int, default=None,
                        help="let checkmate-milp and checkmate-lp build models for graphs this large (default: "
                             "their own limit)")
    parser.add_argument("--json", default=None, help="also write every result to this file")
    parser.add_argument("--graph-file", type=Path, action="append", default=[],
                        help="also run on this graph file (e.g. a traced zoo model; repeatable)")
    parser.add_argument("--checkmate-dir", type=Path, default=CHECKMATE_GRAPHS,
                        help=f"folder of Checkmate node-link graphs (default: {CHECKMATE_GRAPHS})")
    args = parser.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]
    solvers = [name for name in args.solvers.split(",") if name]
    unknown = sorted(set(solvers) - set(SOLVERS))
    if unknown:
        parser.error(f"unknown solver(s) {', '.join(unknown)}; choose from {', '.join(SOLVERS)}")
    selected = set(args.graphs.split(",")) if args.graphs else None
    rows = []
    print(f"{'graph':<16} {'nodes':>5} {'budget':>6} {'solver':<15} {'overhead':>9} {'seconds':>8} {'gap':>7} "
          f"{'LP bound ovh':>12}  note", flush=True)
    for label, graph in graphs(selected, args.checkmate_dir, args.graph_file):
        base = checkpoint_all_cost(graph)
        for fraction in fractions:
            budget = int(checkpoint_all_peak(graph) * fraction)
            head = f"{label:<16} {len(graph):>5} {fraction:>6.0%}"
            if budget < memory_lower_bound(graph):
                print(f"{head} below the memory lower bound ({memory_lower_bound(graph):,} bytes)", flush=True)
                rows.append({"graph": label, "fraction": fraction, "below_lower_bound": True})
                continue
            results = {name: run_one(graph, budget, name, args.time_limit, args.max_nodes) for name in solvers}
            bound = next((r["lp_lower_bound"] for r in results.values() if r.get("lp_lower_bound") is not None), None)
            for name, r in results.items():
                if r["feasible"]:
                    bound_overhead = (bound / base - 1) if bound not in (None, math.inf) else None
                    note = f"warm start {r['warm_start']}" if r.get("warm_start") else (r.get("status") or "")
                    print(f"{head} {name:<15} {r['overhead']:>9.1%} {r['seconds']:>8.1f} {fmt(r['gap'], '.3f'):>7} "
                          f"{fmt(bound_overhead, '.1%'):>12}  {note}", flush=True)
                else:
                    print(f"{head} {name:<15} {'-':>9} {r['seconds']:>8.1f} {'-':>7} {'-':>12}  {r['why'][:90]}",
                          flush=True)
            versus = (equal_cost(results["checkmate-milp"], results["moccasin"])
                      if {"checkmate-milp", "moccasin"} <= results.keys() else None)
            if versus is not None:
                print(f"{head} time to cost {versus['target_cost']:.1f}: moccasin "
                      f"{fmt(versus['moccasin_seconds'], missing='not reached')} s, milp "
                      f"{fmt(versus['milp_seconds'], missing='not reached')} s", flush=True)
            rows.append({"graph": label, "nodes": len(graph), "fraction": fraction, "budget": budget,
                         "checkpoint_all_cost": base, "lp_lower_bound": bound, "results": results,
                         "equal_cost": versus})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
