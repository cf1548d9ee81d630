"""The commands over many solves: ``compare`` (solvers x budgets) and ``sweep`` (one solver's curve)."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ..analysis import ComparisonRow, pareto_optimal, reported_gap, sweep_budgets
from ..batch import compare_on
from ..errors import BudgetError
from ..graph import ComputeGraph, format_bytes, load_graph
from ..schedule import checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound
from ..solvers import solver_names
from ._common import (EXIT_OK, Command, add_backend_args, add_link_args, add_store_args, aligned, backend_of,
                      budget_arg, comma_list, link_of, print_json, store_of)
from ._progress import ProgressBar


def add_compare_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="solve one graph with several solvers at several budgets and tabulate the "
                                       "results")
    p.add_argument("graph", help="graph file")
    p.add_argument("--budgets", default="90%,70%,50%,30%",
                   help="comma-separated budgets: bytes, with a unit, or percents of the checkpoint-all peak "
                        "(default 90%%,70%%,50%%,30%%)")
    p.add_argument("--solvers", default=None, help="comma-separated solver names (default: every solver)")
    p.add_argument("--time-limit", type=float, default=None, help="seconds per solve for the solvers that search")
    p.add_argument("--no-lp-bound", action="store_true", help="skip Checkmate's LP lower bound (a bound for schedules in the "
                                                                 "graph's fixed topological order only)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_link_args(p, "a transfer lane to the host for every solve: offloading solvers (pofo, auto) may use it, and "
                     "each row gets its makespan")
    add_store_args(p)
    add_backend_args(p)


def cmd_compare(args: argparse.Namespace) -> int:
    graph = load_graph(args.graph)
    texts = comma_list(args.budgets)
    if not texts:
        raise BudgetError(f"--budgets {args.budgets!r} names no budget; give e.g. 90%,70%,50%")
    budgets = [budget_arg(t, graph) for t in texts]
    solvers = comma_list(args.solvers) if args.solvers else None
    rows = _compare_on(args, graph, budgets, solvers, lower_bound=not args.no_lp_bound)
    if args.json:
        print_json({"graph": graph.name, "checkpoint_all_peak": checkpoint_all_peak(graph),
                     "checkpoint_all_cost": checkpoint_all_cost(graph), "rows": [r.to_json() for r in rows]})
    else:
        sys.stdout.write(_comparison_table(rows, graph) + "\n")
    return EXIT_OK


def add_sweep_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="one solver across budgets from the lower bound to the checkpoint-all peak: "
                                     "the memory/compute curve")
    p.add_argument("graph", help="graph file")
    p.add_argument("--solver", "-s", required=True, help="solver name")
    p.add_argument("--points", type=int, default=40, help="number of budgets (default 40)")
    p.add_argument("--time-limit", type=float, default=None, help="seconds per solve for the solvers that search")
    p.add_argument("--lp-bound", action="store_true", help="also compute Checkmate's LP bound at every budget (a "
                                                               "bound for schedules in the graph's fixed "
                                                               "topological order only)")
    p.add_argument("--json", action="store_true", help="print the points as JSON")
    add_link_args(p, "a transfer lane to the host for every solve (offloading solvers may use it; each point gets "
                     "its makespan)")
    add_store_args(p)
    add_backend_args(p)


def cmd_sweep(args: argparse.Namespace) -> int:
    graph = load_graph(args.graph)
    rows = _compare_on(args, graph, sweep_budgets(graph, args.points), [args.solver], lower_bound=args.lp_bound)
    front = pareto_optimal(rows)
    if args.json:
        print_json({"graph": graph.name, "solver": args.solver, "checkpoint_all_peak": checkpoint_all_peak(graph),
                     "lower_bound": memory_lower_bound(graph), "checkpoint_all_cost": checkpoint_all_cost(graph),
                     "points": [{**r.to_json(), "pareto": p} for r, p in zip(rows, front)]})
    else:
        sys.stdout.write(_comparison_table(rows, graph, pareto=front) + "\n")
    return EXIT_OK


def _compare_on(args: argparse.Namespace, graph: ComputeGraph, budgets: Sequence[int], solvers: Sequence[str] | None,
                lower_bound: bool) -> list[ComparisonRow]:
    """The comparison through the store and on the backend the arguments name (a progress bar on a terminal)."""
    count = len(budgets) * len(solvers if solvers is not None else solver_names())
    progress = ProgressBar(count, args.command) if sys.stderr.isatty() else None
    rows = compare_on(backend_of(args), store_of(args), graph, budgets, solvers, time_limit=args.time_limit,
                      lower_bound=lower_bound, on_result=progress, link=link_of(args))
    if progress is not None:
        progress.finish()
    return rows


def _comparison_table(rows: Sequence[ComparisonRow], graph: ComputeGraph, pareto: Sequence[bool] | None = None) -> str:
    headers = ["solver", "budget", "feasible", "peak", "overhead", "recomputed", "seconds", "gap", "LP bound"]
    addressed = any(r.feasible and "fragmentation" in r.solver_info for r in rows)
    timed = any(r.makespan is not None for r in rows)
    if addressed:
        headers.append("frag")
    if timed:
        headers.append("makespan")
    if pareto is not None:
        headers.append("pareto")
    lines = []
    for i, r in enumerate(rows):
        budget = f"{r.fraction:.0%} ({format_bytes(r.budget)})"
        mode = r.solver_info.get("mode") if r.feasible else None
        name = f"{r.solver} ({mode})" if isinstance(mode, str) else r.solver
        if r.feasible:
            cells = [name, budget, "yes", format_bytes(r.peak), f"{r.overhead:+.1%}", str(r.recomputed_nodes)]
        else:
            needs = ("refused" if r.refused else
                     f"no (fits at {format_bytes(r.smallest_feasible)})" if r.smallest_feasible is not None else "no")
            cells = [name, budget, needs, "-", "-", "-"]
        cells.append(f"{r.seconds:.3f}{' stored' if r.from_store else ''}")
        gap = reported_gap(r.solver_info) if r.feasible else None
        cells.append(f"{gap:.2%}" if gap is not None else "-")
        bound = r.lower_bound
        cells.append(f"{bound.overhead:+.1%}" if bound.overhead is not None else bound.status)
        if addressed:
            frag = r.solver_info.get("fragmentation") if r.feasible else None
            cells.append(f"{frag:.1%}" if frag is not None else "-")
        if timed:
            cells.append(f"{r.makespan / checkpoint_all_cost(graph) - 1:+.1%}" if r.makespan is not None else "-")
        if pareto is not None:
            cells.append("*" if pareto[i] else "")
        lines.append(cells)
    out = aligned(headers, lines)
    out.append(f"graph {graph.name}: checkpoint-all peak {format_bytes(checkpoint_all_peak(graph))}, lower bound "
               f"{format_bytes(memory_lower_bound(graph))}; overhead = cost over checkpoint-all; gap = the optimality "
               f"gap the solver proved (MIP or CP-SAT gap; 0.00%: optimal in its formulation); 'no (fits at X)': "
               f"the solver found no schedule within the budget, and X is the smallest budget it knows a "
               f"schedule fits (the true smallest may be lower); 'refused': the graph is larger than the solver's "
               f"formulation is built for (--json gives why and the option that raises the limit); LP bound = "
               f"Checkmate's LP lower bound on the overhead of frontier-advancing schedules in the graph's fixed "
               f"topological order, not of all schedules (else why there is none: infeasible, unproven in the "
               f"time limit, refused: too large, skipped); 'stored': read from the results store, with the seconds "
               f"of the solve that stored it; a solver name with a mode in parentheses says which way it ran (torch-"
               f"partitioner: traced = torch's partitioner on the model's own FX graph, sizes = its rules applied to "
               f"the graph file's sizes)")
    if timed:
        out.append("makespan = when the step ends over the transfer lane (copies that do not hide behind compute "
                   "and the stalls they cause included), over checkpoint-all's compute time")
    if addressed:
        out.append("frag = Coop's fragmentation metric, for solvers that place tensors at addresses in a slab of the "
                   "budget's size: the free bytes of the slab over the budget at each allocation that had to evict, "
                   "averaged (free memory no request could use)")
    return "\n".join(out)



COMMANDS: dict[str, Command] = {
    "compare": (add_compare_parser, cmd_compare),
    "sweep": (add_sweep_parser, cmd_sweep),
}
