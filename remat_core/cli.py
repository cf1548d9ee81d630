"""Command line: ``python -m remat_core <command> ...``.

Exit codes: 0 success; 1 invalid schedule (the message names the step); 2 bad input (bad file, bad
graph, bad budget text, unknown solver, a model that cannot be traced, a model too big for the
machine's memory: a message on stderr, no traceback unless ``--debug``); 3 infeasible budget (the
message gives the budget asked and the smallest known feasible one); 4 internal error (any other
exception: a bug of this package, not of the input; one line asking for a report, the traceback with
``--debug``).

Each command is a pair: ``add_<name>_parser(subparsers)`` declares it and ``cmd_<name>(args)``
runs it and returns the exit code.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from typing import Any, Callable, Sequence

from .budget import format_bytes, parse_budget
from .compare import ComparisonRow, compare, pareto_optimal, sweep_budgets
from .cost_models import COST_MODELS
from .decompose import KINDS, PATH_METHODS, TREE_HEURISTICS, decompose, separator_tree
from .errors import BudgetError, InfeasibleBudget, InvalidSchedule, RematError, SolverOptionError, first_line
from .graph import ComputeGraph
from .io import load_graph, load_schedule, save_schedule
from .pareto import reported_gap
from .simulate import checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound, simulate
from .solvers import DEFAULT_SOLVER, list_solvers, solve
from .tensor_check import GRADIENT_TOLERANCE, check_on_tensors

EXIT_OK, EXIT_INVALID_SCHEDULE, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERNAL_ERROR = 0, 1, 2, 3, 4


def _print_json(doc: Any, compact: bool = False) -> None:
    sys.stdout.write(json.dumps(doc, indent=None if compact else 2) + "\n")


def _budget_arg(text: str, graph: ComputeGraph) -> int:
    return parse_budget(text, checkpoint_all_peak(graph))


def _option_args(pairs: Sequence[str]) -> dict[str, Any]:
    """``["steps=4", "exact=true"]`` -> ``{"steps": 4, "exact": True}`` (values read as JSON, else text)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise SolverOptionError(f"--option takes NAME=VALUE, got {pair!r}")
        try:
            options[name] = json.loads(text)
        except json.JSONDecodeError:
            options[name] = text
    return options


# -- solve ------------------------------------------------------------------------------------------

def add_solve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="find a schedule within a memory budget and print it as JSON")
    p.add_argument("graph", help="graph file (remat-graph JSON or Checkmate node-link JSON)")
    p.add_argument("--budget", "-b", required=True,
                   help="bytes (123456), with a unit (512MiB, 1.5GB) or a percent of the checkpoint-all peak (70%%)")
    p.add_argument("--solver", "-s", default=DEFAULT_SOLVER, help=f"solver name (default {DEFAULT_SOLVER}); "
                                                                  f"see the 'solvers' command")
    p.add_argument("--time-limit", type=float, default=None, help="seconds the solver may spend")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE", help="a solver option (repeatable)")
    p.add_argument("-o", "--output", help="write the schedule here instead of printing it")


def cmd_solve(args: argparse.Namespace) -> int:
    graph = load_graph(args.graph)
    budget = _budget_arg(args.budget, graph)
    schedule = solve(graph, budget, args.solver, time_limit=args.time_limit, **_option_args(args.option))
    if args.output:
        save_schedule(schedule, args.output)
        stats = schedule.stats
        sys.stderr.write(f"wrote {args.output}: {len(schedule)} ops, peak {stats['peak']:,} bytes, "
                         f"cost {stats['cost']:.6g} ({stats['overhead']:+.1%} over checkpoint-all)\n")
    else:
        _print_json(schedule.to_json(), compact=True)
    return EXIT_OK


# -- simulate ---------------------------------------------------------------------------------------

def add_simulate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="check a schedule against a graph and measure its peak and cost")
    p.add_argument("graph", help="graph file")
    p.add_argument("schedule", help="remat-schedule JSON file")
    p.add_argument("--budget", "-b", default=None, help="also fail if memory ever exceeds this budget")


def cmd_simulate(args: argparse.Namespace) -> int:
    graph = load_graph(args.graph)
    schedule = load_schedule(args.schedule)
    budget = _budget_arg(args.budget, graph) if args.budget is not None else None
    try:
        result = simulate(graph, schedule, budget=budget)
    except InvalidSchedule as e:
        _print_json({"valid": False, "step": e.step, "op": list(e.op) if e.op else None, "reason": e.reason})
        raise
    report = result.summary()
    if schedule.budget is not None:
        report["budget"] = schedule.budget
        report["within_budget"] = result.peak <= schedule.budget
    _print_json(report)
    return EXIT_OK


# -- info -------------------------------------------------------------------------------------------

def add_info_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="sizes of a graph: nodes, edges, pinned bytes, checkpoint-all peak, lower bound")
    p.add_argument("graph", help="graph file")


def graph_info(graph: ComputeGraph) -> dict[str, Any]:
    """The summary the ``info`` command prints."""
    return {"name": graph.name, "nodes": len(graph), "edges": len(graph.edges), "outputs": len(graph.outputs),
            "pinned_nodes": sum(graph.pinned), "pinned_bytes": graph.pinned_bytes,
            "checkpoint_all_peak": checkpoint_all_peak(graph), "lower_bound": memory_lower_bound(graph),
            "checkpoint_all_cost": checkpoint_all_cost(graph),
            "kinds": dict(Counter(n.kind for n in graph.nodes)), "content_hash": graph.content_hash}


def cmd_info(args: argparse.Namespace) -> int:
    _print_json(graph_info(load_graph(args.graph)))
    return EXIT_OK


# -- solvers ----------------------------------------------------------------------------------------

def add_solvers_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solvers", help="list the solvers")
    p.add_argument("--json", action="store_true", help="print the registry as JSON (with each solver's options)")


def cmd_solvers(args: argparse.Namespace) -> int:
    specs = list_solvers()
    if args.json:
        _print_json([s.describe() for s in specs])
        return EXIT_OK
    width = max(len(s.name) for s in specs)
    for s in specs:
        sys.stdout.write(f"{s.name:<{width}}  {'exact    ' if s.exact else 'heuristic'}  {s.description}\n")
    return EXIT_OK


# -- compare and sweep --------------------------------------------------------------------------------

def _comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


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


def cmd_compare(args: argparse.Namespace) -> int:
    graph = load_graph(args.graph)
    texts = _comma_list(args.budgets)
    if not texts:
        raise BudgetError(f"--budgets {args.budgets!r} names no budget; give e.g. 90%,70%,50%")
    budgets = [_budget_arg(t, graph) for t in texts]
    solvers = _comma_list(args.solvers) if args.solvers else None
    rows = compare(graph, budgets, solvers, time_limit=args.time_limit, lower_bound=not args.no_lp_bound)
    if args.json:
        _print_json({"graph": graph.name, "checkpoint_all_peak": checkpoint_all_peak(graph),
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


def cmd_sweep(args: argparse.Namespace) -> int:
    graph = load_graph(args.graph)
    rows = compare(graph, sweep_budgets(graph, args.points), [args.solver], time_limit=args.time_limit,
                   lower_bound=args.lp_bound)
    front = pareto_optimal(rows)
    if args.json:
        _print_json({"graph": graph.name, "solver": args.solver, "checkpoint_all_peak": checkpoint_all_peak(graph),
                     "lower_bound": memory_lower_bound(graph), "checkpoint_all_cost": checkpoint_all_cost(graph),
                     "points": [{**r.to_json(), "pareto": p} for r, p in zip(rows, front)]})
    else:
        sys.stdout.write(_comparison_table(rows, graph, pareto=front) + "\n")
    return EXIT_OK


def _comparison_table(rows: Sequence[ComparisonRow], graph: ComputeGraph, pareto: Sequence[bool] | None = None) -> str:
    headers = ["solver", "budget", "feasible", "peak", "overhead", "recomputed", "seconds", "gap", "LP bound"]
    if pareto is not None:
        headers.append("pareto")
    lines = []
    for i, r in enumerate(rows):
        budget = f"{r.fraction:.0%} ({format_bytes(r.budget)})"
        if r.feasible:
            cells = [r.solver, budget, "yes", format_bytes(r.peak), f"{r.overhead:+.1%}", str(r.recomputed_nodes)]
        else:
            needs = ("refused" if r.refused else
                     f"no (fits at {format_bytes(r.smallest_feasible)})" if r.smallest_feasible is not None else "no")
            cells = [r.solver, budget, needs, "-", "-", "-"]
        cells.append(f"{r.seconds:.3f}")
        gap = reported_gap(r.solver_info) if r.feasible else None
        cells.append(f"{gap:.2%}" if gap is not None else "-")
        bound = r.lower_bound
        cells.append(f"{bound.overhead:+.1%}" if bound.overhead is not None else bound.status)
        if pareto is not None:
            cells.append("*" if pareto[i] else "")
        lines.append(cells)
    widths = [max(len(h), *(len(c[j]) for c in lines)) if lines else len(h) for j, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(cells, widths)) for cells in lines]
    out.append(f"graph {graph.name}: checkpoint-all peak {format_bytes(checkpoint_all_peak(graph))}, lower bound "
               f"{format_bytes(memory_lower_bound(graph))}; overhead = cost over checkpoint-all; gap = the optimality "
               f"gap the solver proved (MIP or CP-SAT gap; 0.00%: optimal in its formulation); 'no (fits at X)': "
               f"the solver found no schedule within the budget, and X is the smallest budget it knows a "
               f"schedule fits (the true smallest may be lower); 'refused': the graph is larger than the solver's "
               f"formulation is built for (--json gives why and the option that raises the limit); LP bound = "
               f"Checkmate's LP lower bound on the overhead of frontier-advancing schedules in the graph's fixed "
               f"topological order, not of all schedules (else why there is none: infeasible, unproven in the "
               f"time limit, refused: too large, skipped)")
    return "\n".join(out)


# -- trace ----------------------------------------------------------------------------------------

TRACE_LEVELS = ("op", "module")


def _add_model_source_args(p: argparse.ArgumentParser) -> None:
    """The arguments that name a model to trace (shared by ``trace`` and ``execute``)."""
    p.add_argument("model", nargs="?", help="zoo model name, .onnx file or .pt2 file")
    p.add_argument("--model", dest="factory", metavar="PACKAGE.MODULE:FACTORY",
                   help="your own model instead: factory(**options) returns (module, example_inputs[, loss]); this "
                        "imports and runs your code")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the model's own)")
    p.add_argument("--level", choices=TRACE_LEVELS, default="op",
                   help="op: one node per ATen op (default); module: one node per module call per pass")
    p.add_argument("--cost", choices=COST_MODELS, default="flops",
                   help="node costs: flops (default), unit, bytes (memory traffic), measured (CPU seconds)")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="a zoo model option (image_size=128, depth=4), an ONNX symbolic dimension, or a factory "
                        "keyword (repeatable)")


def add_trace_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="trace a model's training step (forward, loss, backward) into a graph file",
                       description="MODEL is a zoo model (see --list), a .onnx file (a forward graph, given a "
                                   "backward pass unless --forward-only) or a .pt2 file saved by torch.export.save.")
    _add_model_source_args(p)
    p.add_argument("--forward-only", action="store_true", help="ONNX: keep the forward graph as it is")
    p.add_argument("--list", action="store_true", help="list the zoo models and their options, then exit")
    p.add_argument("-o", "--output", metavar="GRAPH.json", help="where to write the remat-graph JSON")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors")


def cmd_trace(args: argparse.Namespace) -> int:
    from .errors import TraceError
    from .io import save_graph

    if args.list:
        _print_zoo()
        return EXIT_OK
    if not args.output:
        raise TraceError(args.model or args.factory or "the model", "no output file", hint="add -o GRAPH.json")
    from .sources import trace_source

    graph = trace_source(args.model, factory=args.factory, batch_size=args.batch, level=args.level, cost=args.cost,
                         options=_option_args(args.option), forward_only=args.forward_only)
    save_graph(graph, args.output)
    kinds = Counter(n.kind for n in graph.nodes)
    sys.stderr.write(f"wrote {args.output}: {len(graph)} nodes ({kinds['forward'] + kinds['loss']} forward, "
                     f"{kinds['backward']} backward, {sum(graph.pinned)} pinned), {len(graph.edges)} edges, "
                     f"checkpoint-all peak {format_bytes(checkpoint_all_peak(graph))}\n")
    return EXIT_OK


def _print_zoo() -> None:
    from .zoo import REGISTRY

    for spec in REGISTRY.values():
        options = ", ".join(f"{o.name}={o.default} [{o.minimum}..{o.maximum}]" for o in spec.options)
        sys.stdout.write(f"{spec.name:<13} {spec.reference_params:>12,} params  {spec.description}\n"
                         f"{'':<13} options: {options}\n")


# -- execute ----------------------------------------------------------------------------------------

def add_execute_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("execute", help="trace a model, solve it and run the schedule on real tensors, checking "
                                       "the gradients and the memory against the simulator",
                       description="Traces MODEL with real weights, solves at --budget, runs the schedule op by op "
                                   "on CPU tensors and compares its gradients with the checkpoint-all schedule's. "
                                   "Exit 1 if they differ.")
    _add_model_source_args(p)
    p.add_argument("--budget", "-b", required=True, help="bytes, with a unit, or a percent of the checkpoint-all peak")
    p.add_argument("--solver", "-s", default=DEFAULT_SOLVER, help=f"solver name (default {DEFAULT_SOLVER})")
    p.add_argument("--time-limit", type=float, default=None, help="seconds the solver may spend")
    p.add_argument("--solver-option", action="append", default=[], metavar="NAME=VALUE",
                   help="a solver option (repeatable)")
    p.add_argument("--tolerance", type=float, default=GRADIENT_TOLERANCE,
                   help=f"largest allowed gradient difference, relative to the largest gradient (default "
                        f"{GRADIENT_TOLERANCE:g})")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors")


def cmd_execute(args: argparse.Namespace) -> int:
    from .sources import trace_source

    graph = trace_source(args.model, factory=args.factory, batch_size=args.batch, level=args.level, cost=args.cost,
                         options=_option_args(args.option))
    budget = _budget_arg(args.budget, graph)
    schedule = solve(graph, budget, args.solver, time_limit=args.time_limit, **_option_args(args.solver_option))
    check = check_on_tensors(graph, schedule, tolerance=args.tolerance)
    _print_json({"graph": graph.name, "solver": args.solver, "budget": budget, **check.summary(),
                 "recomputes": schedule.stats["recomputes"]})
    if not check.gradients_match:
        sys.stderr.write(f"error: gradients differ from checkpoint-all by {check.max_gradient_difference:.3g} "
                         f"(largest gradient {check.max_gradient:.3g}, tolerance {args.tolerance:g} relative)\n")
        return EXIT_INVALID_SCHEDULE
    return EXIT_OK


# -- decompose --------------------------------------------------------------------------------------

def add_decompose_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("decompose", help="a tree or path decomposition of the graph's skeleton (pinned nodes left "
                                         "out), with its separator tree, as JSON")
    p.add_argument("graph", help="graph file")
    p.add_argument("--kind", choices=KINDS, default="tree", help="tree (default) or path decomposition")
    p.add_argument("--heuristic", default=None,
                   help=f"tree: {', '.join(TREE_HEURISTICS)} (default min_degree); "
                        f"path: {', '.join(PATH_METHODS)} (default best)")


def cmd_decompose(args: argparse.Namespace) -> int:
    decomposition = decompose(load_graph(args.graph), args.kind, args.heuristic)
    _print_json(decomposition.to_json(separator_tree(decomposition)))
    return EXIT_OK


# -- entry point ------------------------------------------------------------------------------------

COMMANDS: dict[str, tuple[Callable[[argparse._SubParsersAction], None], Callable[[argparse.Namespace], int]]] = {
    "solve": (add_solve_parser, cmd_solve),
    "simulate": (add_simulate_parser, cmd_simulate),
    "info": (add_info_parser, cmd_info),
    "solvers": (add_solvers_parser, cmd_solvers),
    "compare": (add_compare_parser, cmd_compare),
    "sweep": (add_sweep_parser, cmd_sweep),
    "trace": (add_trace_parser, cmd_trace),
    "execute": (add_execute_parser, cmd_execute),
    "decompose": (add_decompose_parser, cmd_decompose),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m remat_core",
                                     description="Remat Explorer: tensor rematerialization schedules for training graphs.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_parser, _ in COMMANDS.values():
        add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.debug:
        logging.getLogger("remat_core").setLevel(logging.DEBUG)  # the tracer then keeps torch's own logs
    try:
        return COMMANDS[args.command][1](args)
    except InvalidSchedule as e:
        return _fail(args, e, EXIT_INVALID_SCHEDULE)
    except InfeasibleBudget as e:
        return _fail(args, e, EXIT_INFEASIBLE)
    except (RematError, OSError, MemoryError) as e:
        return _fail(args, e, EXIT_BAD_INPUT)
    except Exception as e:  # not the input's fault: every bad input raises a RematError
        return _fail(args, e, EXIT_INTERNAL_ERROR)


def _fail(args: argparse.Namespace, error: Exception, code: int) -> int:
    if args.debug:
        raise error
    if code == EXIT_INTERNAL_ERROR:
        sys.stderr.write(f"internal error: {type(error).__name__}: {first_line(error)}\nThis is a bug in Remat "
                         f"Explorer, not in your input: please report it with the command you ran; rerun with "
                         f"--debug for the traceback.\n")
    elif isinstance(error, MemoryError):  # the machine's limit, not a bug: say what would fit
        sys.stderr.write("error: ran out of memory; try a smaller model, batch or input size, or --level module\n")
    else:
        sys.stderr.write(f"error: {error}\n")
    return code
