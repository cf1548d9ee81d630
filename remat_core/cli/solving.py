"""The solving commands: ``solve`` (a schedule within a budget), ``simulate`` (check one), ``solvers`` (the registry)."""

from __future__ import annotations

import argparse
import sys
import time

from ..errors import InvalidSchedule, SolverOptionError
from ..graph import load_graph
from ..schedule import load_schedule, replay, save_schedule, simulate, snapshot_pickle
from ..solvers import DEFAULT_SOLVER, list_solvers
from ..schedule.links import schedule_link
from ._common import (EXIT_OK, Command, add_link_args, add_memory_args, add_store_args, allocator_of, budget_arg,
                      link_of, option_args, outcome_exit, print_json, solved_through_store)


def add_solve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="find a schedule within a memory budget and print it as JSON")
    p.add_argument("graph", help="graph file (remat-graph JSON or Checkmate node-link JSON)")
    p.add_argument("--budget", "-b", required=True,
                   help="bytes (123456), with a unit (512MiB, 1.5GB) or a percent of the checkpoint-all peak (70%%)")
    p.add_argument("--solver", "-s", default=DEFAULT_SOLVER, help=f"solver name (default {DEFAULT_SOLVER}); "
                                                                  f"see the 'solvers' command")
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds the whole solve may take (reading the graph and building models included); the best "
                        "schedule found by then is returned")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE", help="a solver option (repeatable)")
    p.add_argument("-o", "--output", help="write the schedule here instead of printing it")
    add_memory_args(p, "the budget holds")
    add_link_args(p, "a transfer lane to the host: offloading solvers (pofo, auto) may copy tensors out and back "
                     "over it, and the schedule's makespan is reported")
    add_store_args(p)


def cmd_solve(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    graph = load_graph(args.graph)
    budget = budget_arg(args.budget, graph)
    # the limit bounds the whole command: reading the graph counts (the store keys the limit as asked)
    outcome = solved_through_store(args, graph, budget, args.solver, args.time_limit, option_args(args.option),
                                   spent=time.perf_counter() - started)
    if not outcome.feasible:
        return outcome_exit(outcome)
    schedule = outcome.schedule
    if schedule.solver_info.get("stopped_at_time_limit"):
        sys.stderr.write(f"{args.solver}: stopped at the time limit of {args.time_limit:g} s; this is the best "
                         f"schedule found by then\n")
    if args.output:
        save_schedule(schedule, args.output)
        stats = schedule.stats
        lane = (f", makespan {stats['makespan']:.6g} ({stats['bytes_to_host']:,} bytes offloaded)"
                if "makespan" in stats else "")
        sys.stderr.write(f"wrote {args.output}: {len(schedule)} ops, peak {stats['peak']:,} bytes, "
                         f"cost {stats['cost']:.6g} ({stats['overhead']:+.1%} over checkpoint-all){lane}\n")
    else:
        print_json(schedule.to_json(), compact=True)
    return EXIT_OK


def add_simulate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="check a schedule against a graph and measure its peak and cost")
    p.add_argument("graph", help="graph file")
    p.add_argument("schedule", help="remat-schedule JSON file")
    p.add_argument("--budget", "-b", default=None, help="also fail if memory ever exceeds this budget")
    add_memory_args(p, "also report")
    p.add_argument("--snapshot", metavar="OUT.pickle", default=None,
                   help="with --memory reserved: write the allocator's trace as a memory snapshot that PyTorch's "
                        "memory_viz (pytorch.org/memory_viz) opens")
    add_link_args(p, "time the schedule's offload and prefetch ops on a transfer lane")


def cmd_simulate(args: argparse.Namespace) -> int:
    graph = load_graph(args.graph)
    schedule = load_schedule(args.schedule)
    budget = budget_arg(args.budget, graph) if args.budget is not None else None
    allocator = allocator_of(args)
    if args.snapshot and allocator is None:
        raise SolverOptionError("--snapshot writes the caching allocator's trace: add --memory reserved")
    link = link_of(args)
    if link is None and isinstance(schedule.solver_info.get("link"), dict) and schedule.has_transfers:
        link = schedule_link(schedule)
        sys.stderr.write(f"timing the copies over the link the schedule was solved for ({link.to_host:g} bytes per "
                         f"cost unit to the host, {link.to_device:g} back); --bandwidth sets another\n")
    try:
        result = simulate(graph, schedule, budget=budget, link=link)
    except InvalidSchedule as e:
        print_json({"valid": False, "step": e.step, "op": list(e.op) if e.op else None, "reason": e.reason})
        raise
    report = result.summary()
    if result.timing is not None:
        report["transfers"] = result.timing.summary()
    if schedule.budget is not None:
        report["budget"] = schedule.budget
        report["within_budget"] = result.peak <= schedule.budget
    if allocator is not None:
        replayed = replay(graph, schedule, allocator)
        report["allocator"] = {"settings": allocator.text() or "defaults", "peak_reserved": replayed.peak_reserved,
                               "peak_allocated": replayed.peak_allocated,
                               "largest_fragmentation": max(replayed.fragmentation, default=0.0)}
        if args.snapshot:
            with open(args.snapshot, "wb") as out:
                out.write(snapshot_pickle(replayed, {n.id: n.display_name for n in graph.nodes}))
    print_json(report)
    return EXIT_OK



def add_solvers_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solvers", help="list the solvers")
    p.add_argument("--json", action="store_true", help="print the registry as JSON (with each solver's options)")


def cmd_solvers(args: argparse.Namespace) -> int:
    specs = list_solvers()
    if args.json:
        print_json([s.describe() for s in specs])
        return EXIT_OK
    width = max(len(s.name) for s in specs)
    for s in specs:
        sys.stdout.write(f"{s.name:<{width}}  {'exact    ' if s.exact else 'heuristic'}  {s.description}\n")
    return EXIT_OK



COMMANDS: dict[str, Command] = {
    "solve": (add_solve_parser, cmd_solve),
    "simulate": (add_simulate_parser, cmd_simulate),
    "solvers": (add_solvers_parser, cmd_solvers),
}
