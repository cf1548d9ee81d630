"""What every command shares: exit codes, JSON output, budget and option arguments, the results store and
the backend arguments."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from ..batch import BACKENDS, Backend, open_backend
from ..errors import InfeasibleBudget, SolverOptionError
from ..graph import ComputeGraph, parse_budget
from ..schedule import AllocatorConfig, Link, checkpoint_all_peak, memory_lower_bound
from ..schedule.links import DEFAULT_COMPUTE_RATE, LINK_PRESETS, parse_link
from ..solvers import FEASIBLE, INFEASIBLE, REFUSED, STOPPED, SolveOutcome
from ..store import STORE_ENV, STORED_AT, ResultStore, default_store_path, store_path, stored_solve

EXIT_OK, EXIT_INVALID_SCHEDULE, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERNAL_ERROR, EXIT_STOPPED = 0, 1, 2, 3, 4, 5
EXIT_CODES = {FEASIBLE: EXIT_OK, INFEASIBLE: EXIT_INFEASIBLE, STOPPED: EXIT_STOPPED, REFUSED: EXIT_BAD_INPUT}
"""The exit code of a solve's outcome (a failed one: :data:`EXIT_INTERNAL_ERROR` when internal, else bad input)."""

Command = tuple[Callable[[argparse._SubParsersAction], None], Callable[[argparse.Namespace], int]]
"""A command: ``add_parser(subparsers)`` declares it, ``run(args)`` runs it and returns the exit code."""


def print_json(doc: Any, compact: bool = False) -> None:
    sys.stdout.write(json.dumps(doc, indent=None if compact else 2) + "\n")


def budget_arg(text: str, graph: ComputeGraph) -> int:
    """A budget argument (bytes, with a unit, or a percent of the checkpoint-all peak) in bytes.

    A bare number is bytes; one below the graph's lower bound is refused (as infeasible) with the forms that were
    probably meant (``50%``, ``50MiB``)."""
    budget = parse_budget(text, checkpoint_all_peak(graph))
    lower = memory_lower_bound(graph)
    bare = text.strip().replace(".", "", 1).isdigit()
    if bare and budget < lower:
        number = text.strip()
        raise InfeasibleBudget(budget, checkpoint_all_peak(graph), "",
                               f"below the lower bound of {lower:,} bytes that any schedule needs; a bare number is "
                               f"bytes: for a percent of the checkpoint-all peak write {number}%, for a size "
                               f"{number}MiB or {number}GiB")
    return budget


def option_args(pairs: Sequence[str]) -> dict[str, Any]:
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


def aligned(headers: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
    """A text table: the header line and one line per row, each column as wide as its widest cell."""
    widths = [max(len(h), *(len(cells[j]) for cells in lines)) if lines else len(h) for j, h in enumerate(headers)]
    return ["  ".join(c.ljust(w) for c, w in zip(cells, widths)) for cells in [list(headers), *lines]]


def comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_store_args(p: argparse.ArgumentParser) -> None:
    """``--store PATH`` / ``--no-store``: which results store a command reads before solving and writes after."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--store", metavar="PATH",
                       help=f"results store file (default: ${STORE_ENV}, else {_home_relative(default_store_path())})")
    group.add_argument("--no-store", action="store_true", help="neither read nor write a results store")


def store_of(args: argparse.Namespace) -> ResultStore | None:
    """The results store the arguments name (None for ``--no-store`` or ``REMAT_STORE=off``)."""
    path = store_path(args.store, args.no_store)
    return ResultStore(path) if path is not None else None


def add_memory_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--memory", choices=("allocated", "reserved"), default="allocated",
                   help=f"allocated: {what} the bytes tensors hold (default); reserved: {what} what PyTorch's CUDA "
                        f"caching allocator reserves to serve them (rounding, pools, segments, fragmentation)")
    p.add_argument("--allocator", default=None, metavar="SETTINGS",
                   help="with --memory reserved: the allocator's settings as PYTORCH_CUDA_ALLOC_CONF writes them "
                        "(max_split_size_mb:128,expandable_segments:True,roundup_power2_divisions:4); default: "
                        "PyTorch's defaults")


def add_link_args(p: argparse.ArgumentParser, what: str) -> None:
    """``--bandwidth``, ``--latency``, ``--half-duplex``, ``--compute-rate``: the transfer lane to the host."""
    p.add_argument("--bandwidth", metavar="RATE[,RATE]", default=None,
                   help=f"{what}: a preset ({', '.join(LINK_PRESETS)}), or bytes per unit of the graph's cost "
                        f"(4096, 1MiB) or per second (12GB/s), one value or two: to the host, to the device")
    p.add_argument("--latency", type=float, default=0.0, help="with --bandwidth: cost units every copy takes besides "
                                                               "its bytes (default 0)")
    p.add_argument("--half-duplex", action="store_true",
                   help="with --bandwidth: one lane for both directions (default: one each way)")
    p.add_argument("--compute-rate", type=float, default=DEFAULT_COMPUTE_RATE, metavar="UNITS_PER_S",
                   help=f"with a --bandwidth per second or a preset: the graph's cost units the device runs per "
                        f"second (default {DEFAULT_COMPUTE_RATE:g}: FLOP costs on a V100's 14 TFLOP/s; 1 for graphs "
                        f"traced with --cost measured, in seconds)")


def link_of(args: argparse.Namespace) -> Link | None:
    """The transfer lane the link arguments describe (None without ``--bandwidth``).

    Raises
    ------
    SolverOptionError
        For a bandwidth that does not read, a negative latency, or lane settings without a bandwidth.
    """
    if args.bandwidth is None:
        if args.latency or args.half_duplex:
            raise SolverOptionError("--latency and --half-duplex describe the transfer lane: add --bandwidth")
        return None
    try:
        return parse_link(args.bandwidth, args.latency, not args.half_duplex, args.compute_rate)
    except ValueError as e:
        raise SolverOptionError(f"--{e}" if str(e).startswith("bandwidth") else str(e)) from None


def allocator_of(args: argparse.Namespace) -> AllocatorConfig | None:
    """The allocator model ``--memory reserved`` asks for (None: bytes as tensors hold them)."""
    if args.memory != "reserved":
        if args.allocator is not None:
            raise SolverOptionError("--allocator sets the caching allocator of --memory reserved; add --memory "
                                    "reserved, or leave --allocator out")
        return None
    return AllocatorConfig.parse(args.allocator or "")


def solved_through_store(args: argparse.Namespace, graph: ComputeGraph, budget: int, solver: str,
                         time_limit: float | None, options: dict[str, Any], spent: float = 0.0) -> SolveOutcome:
    """One solve through the store the arguments name; says on stderr when the answer came from the store."""
    store = store_of(args)
    outcome = stored_solve(graph, budget, solver, time_limit, store=store, spent=spent,
                           allocator=allocator_of(args), link=link_of(args), **options)
    if outcome.from_store:
        when = outcome.schedule.solver_info[STORED_AT] if outcome.schedule is not None else "earlier"
        sys.stderr.write(f"from the results store {store.path} (solved {when}, in {outcome.seconds:.3g} s); "
                         f"--no-store solves again\n")
    return outcome


def outcome_exit(outcome: SolveOutcome) -> int:
    """A solve without a schedule said on stderr, and its exit code (0 for a feasible one, which says nothing)."""
    if outcome.feasible:
        return EXIT_OK
    if outcome.internal:
        sys.stderr.write(f"internal error: {outcome.message}\nThis is a bug in Remat Explorer, not in your input: "
                         f"please report it with the command you ran.\n")
        return EXIT_INTERNAL_ERROR
    sys.stderr.write(f"error: {outcome.message}\n")
    return EXIT_CODES.get(outcome.status, EXIT_BAD_INPUT)


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """``--backend``, ``--workers``, ``--ray-address``: where the solves of a grid run."""
    p.add_argument("--backend", choices=BACKENDS, default="local",
                   help="local: this machine (default); ray: a local Ray started for the run, or the cluster at "
                        "--ray-address")
    p.add_argument("--workers", type=int, default=1,
                   help="solves at once (default 1: in this process; local: worker processes; ray: the local Ray's "
                        "CPUs)")
    p.add_argument("--ray-address", metavar="ADDR", default=None,
                   help="join this Ray cluster (host:port from 'ray start --head', or ray://host:10001) instead of "
                        "starting a local Ray")


def backend_of(args: argparse.Namespace) -> Backend:
    return open_backend(args.backend, args.workers, args.ray_address)


def _home_relative(path: Path) -> str:
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)
