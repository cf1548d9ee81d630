"""The commands that take a model: ``trace`` (its training step into a graph file), ``execute`` (one real
training step with a plan: replayed, as selective activation checkpointing, or compiled) and ``policy`` (a SAC
plan written as a file a training script runs without this package). PyTorch is imported only when one of them
runs."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from ..analysis import reported_gap
from ..errors import InfeasibleBudget
from ..graph import COST_MODELS, format_bytes
from ..run import GRADIENT_TOLERANCE, ROUTES, StepReport, get_route
from ..schedule import checkpoint_all_peak, memory_lower_bound
from ..solvers import DEFAULT_SOLVER
from ..store import FROM_STORE, STORED_AT, stored_schedule
from ._common import (EXIT_INVALID_SCHEDULE, EXIT_OK, Command, add_link_args, add_store_args, budget_arg, link_of,
                      option_args, print_json, store_of)

TRACE_LEVELS = ("op", "module")
EXECUTE_TIME_LIMIT = 5.0
"""Seconds ``execute``'s solve may take by default: the step it plans for runs in seconds."""


def _add_model_source_args(p: argparse.ArgumentParser, cost: str = "flops") -> None:
    """The arguments that name a model to trace (shared by ``trace`` and ``execute``; ``cost``: the default cost
    model, ``measured`` where the plan will run)."""
    p.add_argument("model", nargs="?", help="zoo model name, .onnx file or .pt2 file")
    p.add_argument("--model", dest="factory", metavar="PACKAGE.MODULE:FACTORY",
                   help="your own model instead: factory(**options) returns (module, example_inputs[, loss]); this "
                        "imports and runs your code")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the model's own)")
    p.add_argument("--level", choices=TRACE_LEVELS, default="op",
                   help="op: one node per ATen op (default); module: one node per module call per pass")
    p.add_argument("--cost", choices=COST_MODELS, default=cost,
                   help=f"node costs: flops, unit, bytes (memory traffic), measured (seconds, each op timed once "
                        f"and kept by shape); default {cost}")
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
    from ..errors import TraceError
    from ..graph import save_graph

    if args.list:
        _print_zoo()
        return EXIT_OK
    if not args.output:
        raise TraceError(args.model or args.factory or "the model", "no output file", hint="add -o GRAPH.json")
    from ..frontends import trace_source

    graph = trace_source(args.model, factory=args.factory, batch_size=args.batch, level=args.level, cost=args.cost,
                         options=option_args(args.option), forward_only=args.forward_only)
    save_graph(graph, args.output)
    kinds = Counter(n.kind for n in graph.nodes)
    sys.stderr.write(f"wrote {args.output}: {len(graph)} nodes ({kinds['forward'] + kinds['loss']} forward, "
                     f"{kinds['backward']} backward, {sum(graph.pinned)} pinned), {len(graph.edges)} edges, "
                     f"checkpoint-all peak {format_bytes(checkpoint_all_peak(graph))}\n")
    return EXIT_OK


def _print_zoo() -> None:
    from ..frontends import REGISTRY

    for spec in REGISTRY.values():
        options = ", ".join(f"{o.name}={o.default} [{o.minimum}..{o.maximum}]" for o in spec.options)
        sys.stdout.write(f"{spec.name:<13} {spec.reference_params:>12,} params  {spec.description}\n"
                         f"{'':<13} options: {options}\n")


def _add_plan_args(p: argparse.ArgumentParser, solver_help: str) -> None:
    """The model to trace with measured costs, and the budget, solver and limits it is planned with (``execute``,
    ``policy``)."""
    _add_model_source_args(p, cost="measured")
    p.add_argument("--budget", "-b", required=True, help="bytes, with a unit, or a percent of the checkpoint-all peak")
    p.add_argument("--solver", "-s", default=None, help=solver_help)
    p.add_argument("--time-limit", type=float, default=EXECUTE_TIME_LIMIT,
                   help=f"seconds the solver may spend (default {EXECUTE_TIME_LIMIT:g}: the step itself takes "
                        f"seconds; a search stopped there says so, and a longer limit may find a cheaper plan)")
    p.add_argument("--solver-option", action="append", default=[], metavar="NAME=VALUE",
                   help="a solver option (repeatable)")


def add_execute_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("execute", help="trace a model, solve it and train it one real step with the plan: replayed "
                                       "op by op, as selective activation checkpointing, or compiled",
                       description="Traces MODEL with real weights, solves at --budget and trains the model one step "
                                   "with the schedule, the way --via names: plan (the schedule replayed op by op), "
                                   "sac (selective activation checkpointing: save what the plan keeps, recompute "
                                   "what it frees) or compile (torch.compile with the plan as Inductor's "
                                   "partitioner's knapsack). Reports the gradients against the same step in eager "
                                   "PyTorch, and the measured, simulated and eager activation peaks (bytes above "
                                   "the weights). Exit 1 if the gradients differ.")
    _add_plan_args(p, f"solver name (default: the route's own planner, sac-planner for --via sac, else "
                      f"{DEFAULT_SOLVER})")
    p.add_argument("--via", choices=tuple(ROUTES), default=next(iter(ROUTES)),
                   help="; ".join(f"{name}: {route.summary}" for name, route in ROUTES.items()))
    add_link_args(p, "a transfer lane to the host the solver may offload over (--via offload needs one; plan "
                     "replays offloads too)")
    p.add_argument("--tolerance", type=float, default=GRADIENT_TOLERANCE,
                   help=f"largest allowed gradient difference, relative to the largest gradient (default "
                        f"{GRADIENT_TOLERANCE:g})")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_store_args(p)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors")


def cmd_execute(args: argparse.Namespace) -> int:
    from ..frontends import trace_source
    from ..run import train_step

    from ..run.progress import PlanningProgress

    route = get_route(args.via)
    link = link_of(args)
    route.check(link)
    with PlanningProgress(args.model or args.factory, args.time_limit) as progress:
        progress.phase(f"tracing ({args.cost} costs)")
        graph = trace_source(args.model, factory=args.factory, batch_size=args.batch, level=args.level,
                             cost=args.cost, options=option_args(args.option))
        budget = budget_arg(args.budget, graph)
        options = option_args(args.solver_option)
        solver = args.solver or route.default_solver(graph)
        progress.phase(f"solving with {solver} for --via {route.name}")
        store = store_of(args)
        try:
            schedule = route.plan(graph, budget, lambda asked: stored_schedule(
                graph, asked, solver, args.time_limit, store=store, link=link, **options)).schedule
        except InfeasibleBudget as refusal:
            raise InfeasibleBudget(refusal.budget, refusal.smallest_feasible, refusal.solver,
                                   "; ".join(filter(None, [refusal.detail, _smallest_budgets(graph, route, solver),
                                                           _budget_scale(graph)]))) from refusal
    if schedule.solver_info.get(FROM_STORE):
        sys.stderr.write(f"plan from the results store {store.path} (solved {schedule.solver_info[STORED_AT]}); "
                         f"--no-store plans again\n")
    note = _search_note(solver, schedule, args.time_limit)
    if note:
        sys.stderr.write(f"note: {note}\n")
    report = train_step(graph, schedule, args.via, tolerance=args.tolerance)
    held = report.measured_peak + graph.pinned_bytes
    if args.json:
        print_json({"graph": graph.name, "solver": solver, "budget": budget,
                    "recomputes": schedule.stats["recomputes"], "held_of_budget": round(held / budget, 4),
                    **report.summary()})
    else:
        _print_step(graph.name, solver, budget, report, held)
    over = route.over_budget(held, budget, report.details)
    if over:
        sys.stderr.write(f"warning: {over}\n")
    for item in report.uncontrolled:
        sys.stderr.write(f"warning: {item.tensor} ({format_bytes(item.bytes)}) is saved, not as planned: "
                         f"{item.reason}\n")
    if report.gradients_equal is False:
        sys.stderr.write(f"error: gradients differ from the eager step's by {report.max_grad_diff:.3g} "
                         f"(largest gradient {report.max_gradient:.3g}, tolerance {args.tolerance:g} relative)\n")
        return EXIT_INVALID_SCHEDULE
    return EXIT_OK


def add_policy_parser(sub: argparse._SubParsersAction) -> None:
    from ..run.policy_formats import FORMATS

    p = sub.add_parser("policy", help="plan a model for SAC and write the plan as a file a training script runs "
                                      "without this package",
                       description="Traces MODEL with real weights, plans it for selective activation checkpointing "
                                   "at --budget (the SAC planner by default: regions at module calls) and writes "
                                   "the plan to -o: format torch, one Python file that needs only torch, with "
                                   "apply(model) installing the plan on your own module in place and "
                                   "PREDICTED_PEAK_BYTES; hf, Hugging Face's activation_checkpointing_enable call; "
                                   "torchtitan, its [activation_checkpoint] settings (the last two where the plan "
                                   "is one of theirs).")
    _add_plan_args(p, "solver name (default: sac-planner, whose regions are module calls)")
    p.add_argument("-o", "--output", required=True, metavar="POLICY.py", help="where to write the policy")
    p.add_argument("--format", choices=FORMATS, default=FORMATS[0],
                   help="torch (a torch-only .py with apply(model)), hf or torchtitan")
    add_store_args(p)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors")


def cmd_policy(args: argparse.Namespace) -> int:
    from ..frontends import trace_source
    from ..run.policy_export import export_policy, plan_facts
    from ..run.progress import PlanningProgress

    route = get_route("sac")
    with PlanningProgress(args.model or args.factory, args.time_limit) as progress:
        progress.phase(f"tracing ({args.cost} costs)")
        graph = trace_source(args.model, factory=args.factory, batch_size=args.batch, level=args.level,
                             cost=args.cost, options=option_args(args.option))
        budget = budget_arg(args.budget, graph)
        options = option_args(args.solver_option)
        solver = args.solver or route.default_solver(graph)
        store = store_of(args)
        progress.phase(f"solving with {solver} for SAC")
        planned = route.plan(graph, budget, lambda asked: stored_schedule(
            graph, asked, solver, args.time_limit, store=store, link=None, **options))
        nearest = None if solver == "sac-planner" else (
            lambda: stored_schedule(graph, budget, "sac-planner", args.time_limit, store=store))
        path = export_policy(graph, planned.schedule, args.output, budget=budget,
                             promised_peak=planned.promised_peak, format=args.format, nearest=nearest)
    facts = plan_facts(graph, planned.schedule, budget, planned.promised_peak)
    print(f"wrote {path} ({args.format}) for {graph.name}: predicted peak {format_bytes(facts.predicted_peak)} "
          f"within the budget of {format_bytes(budget)}, predicted step {facts.predicted_step:.2f}x eager")
    return EXIT_OK


def _search_note(solver: str, schedule, time_limit: float | None) -> str | None:
    """What a plan found by a search that stopped at its time limit might still gain, for stderr."""
    if not schedule.solver_info.get("stopped_at_time_limit") or time_limit is None:
        return None
    gap = reported_gap(schedule.solver_info)
    proved = f"; it is proved within {gap:.1%} of the best plan in its search space" if gap is not None else ""
    return (f"{solver} stopped at the time limit of {time_limit:g} s with a plan {schedule.stats['overhead']:+.1%} "
            f"over checkpoint-all's cost{proved}; a longer --time-limit may find a cheaper one")


def _smallest_budgets(graph, route, solver: str) -> str:
    """The smallest budget the route's planner reaches and the smallest any route reaches (the lower bound), for a
    refusal."""
    from ..solvers import solve_outcome

    if route.planner != solver or route.default_solver(graph) != solver:
        return ""
    least = solve_outcome(graph, checkpoint_all_peak(graph), solver)
    smallest = solve_outcome(graph, memory_lower_bound(graph), solver)
    reached = smallest.smallest_feasible if not smallest.feasible else smallest.schedule.stats["peak"]
    if reached is None or not least.feasible:
        return ""
    return (f"the smallest budget --via {route.name} reaches is {format_bytes(reached)} ({solver}); the smallest "
            f"any route reaches is the lower bound, {format_bytes(memory_lower_bound(graph))} (--via plan)")


def _budget_scale(graph) -> str:
    """A percent budget's scale: the lower bound and the weights and inputs as percents of the checkpoint-all peak
    (weights cannot be rematerialized: at small batches they are most of the peak)."""
    peak = checkpoint_all_peak(graph)
    return (f"the lower bound is {memory_lower_bound(graph) / peak:.0%} of the checkpoint-all peak "
            f"{format_bytes(peak)}, the weights and inputs alone {graph.pinned_bytes / peak:.0%}")


def _print_step(graph: str, solver: str, budget: int, report: StepReport, held: int) -> None:
    def ratio(part: float, whole: float) -> str:
        return f"{part / whole:.2f}x" if whole else "n/a"

    gradients = ("not compared" if report.gradients_equal is None else
                 f"{'equal' if report.gradients_equal else 'DIFFERENT'} (largest difference "
                 f"{report.max_grad_diff:.3g})")
    lines = [f"{graph}: {solver} at {format_bytes(budget)}, one training step via {report.via} on {report.device}",
             f"  gradients vs {report.reference}: {gradients}",
             f"  activation peak: measured {format_bytes(report.measured_peak)}, simulated "
             f"{format_bytes(report.simulated_peak)}, eager {format_bytes(report.eager_peak)} "
             f"({ratio(report.measured_peak, report.eager_peak)} of eager; {report.peak_measure})",
             f"  held with the weights and inputs: {format_bytes(held)}, {held / budget:.2f}x the budget",
             f"  step time: {report.step_seconds:.3f} s, eager {report.eager_step_seconds:.3f} s "
             f"({ratio(report.step_seconds, report.eager_step_seconds)}); predicted "
             f"{report.predicted_step_seconds:.3f} s ({1 + report.predicted_overhead:.2f}x)"]
    details = report.details
    if details.get("plan_offloaded_nodes") == 0:
        lines.append("  offloaded: nothing: over this link the plan found recomputing (or keeping) cheaper than "
                     "copying")
    elif "bytes_to_host" in details:
        rates = [f"{details[k] / 1e9:.1f} GB/s {way}" for k, way in (("bandwidth_to_host", "out"),
                                                                   ("bandwidth_to_device", "back"))
                 if details.get(k)]
        lines.append(f"  offloaded: {details['offloaded_values']} tensor(s), {format_bytes(details['bytes_to_host'])} "
                     f"to the host and {format_bytes(details['bytes_to_device'])} back"
                     + (f" ({', '.join(rates)} measured)" if rates else f"; transfers: {details['transfers']}"))
    if report.uncontrolled:
        lines.append(f"  not as planned: {len(report.uncontrolled)} tensor(s) saved, "
                     f"{format_bytes(report.uncontrolled_bytes)} more than planned")
    lines += [f"  note: {note}" for note in report.notes]
    sys.stdout.write("\n".join(lines) + "\n")


COMMANDS: dict[str, Command] = {
    "trace": (add_trace_parser, cmd_trace),
    "execute": (add_execute_parser, cmd_execute),
    "policy": (add_policy_parser, cmd_policy),
}
