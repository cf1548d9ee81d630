"""The commands that take a model: ``trace`` (its training step into a graph file) and ``execute`` (a schedule
run on its real tensors). PyTorch is imported only when one of them runs."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from ..graph import COST_MODELS, format_bytes
from ..run import GRADIENT_TOLERANCE, check_on_tensors
from ..schedule import checkpoint_all_peak
from ..solvers import DEFAULT_SOLVER, solve
from ._common import EXIT_INVALID_SCHEDULE, EXIT_OK, Command, budget_arg, option_args, print_json


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
    from ..frontends import trace_source

    graph = trace_source(args.model, factory=args.factory, batch_size=args.batch, level=args.level, cost=args.cost,
                         options=option_args(args.option))
    budget = budget_arg(args.budget, graph)
    schedule = solve(graph, budget, args.solver, time_limit=args.time_limit, **option_args(args.solver_option))
    check = check_on_tensors(graph, schedule, tolerance=args.tolerance)
    print_json({"graph": graph.name, "solver": args.solver, "budget": budget, **check.summary(),
                 "recomputes": schedule.stats["recomputes"]})
    if not check.gradients_match:
        sys.stderr.write(f"error: gradients differ from checkpoint-all by {check.max_gradient_difference:.3g} "
                         f"(largest gradient {check.max_gradient:.3g}, tolerance {args.tolerance:g} relative)\n")
        return EXIT_INVALID_SCHEDULE
    return EXIT_OK



COMMANDS: dict[str, Command] = {
    "trace": (add_trace_parser, cmd_trace),
    "execute": (add_execute_parser, cmd_execute),
}
