"""The commands about stored results: ``store`` (stats, export, prune) and ``study`` (a resumable grid of
graphs x solvers x budgets, written as tables and Pareto figures)."""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import time
from pathlib import Path

from ..batch import Study, load_study_graph, run_study, study_cells, write_study
from ..errors import UnknownSolver
from ..graph import COST_MODELS, format_bytes, load_graph
from ..solvers import get_solver
from ..store import EXPORT_COLUMNS, ResultStore, StoreError, store_path
from ._common import (EXIT_OK, Command, add_backend_args, add_link_args, add_store_args, aligned, backend_of,
                      comma_list, link_of, option_args, outcome_exit, print_json, store_of)
from ._progress import ProgressBar

AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
EXPORT_FORMATS = ("csv", "json")


def add_store_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("store", help="the results store: stats, export, prune",
                       description="Solves are kept in a results store (SQLite) and read back instead of solved "
                                   "again; these commands look into it and tidy it.")
    actions = p.add_subparsers(dest="store_action", required=True, metavar="ACTION")
    stats = actions.add_parser("stats", help="how many results, how many bytes, of which graphs and solvers")
    stats.add_argument("--json", action="store_true", help="print the figures as JSON")
    export = actions.add_parser("export", help="every stored result as a table, one row per result")
    export.add_argument("--format", choices=EXPORT_FORMATS, default="csv", help="csv (default) or json")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    prune = actions.add_parser("prune", help="delete stored results: old ones, one graph's, or all")
    which = prune.add_mutually_exclusive_group(required=True)
    which.add_argument("--older-than", metavar="AGE", help="stored longer ago than AGE: 30d, 12h, 90m, 45s, 2w")
    which.add_argument("--graph", metavar="HASH", help="of one graph: its content hash (or a prefix of it, 6+ "
                                                       "digits; 'info' prints it) or its graph file")
    which.add_argument("--all", action="store_true", help="every result")
    for action in (stats, export, prune):
        action.add_argument("--store", metavar="PATH", help="the store file (default: $REMAT_STORE, else the "
                                                            "default path in the cache directory)")


def cmd_store(args: argparse.Namespace) -> int:
    if args.store_action == "prune":  # the arguments are read before the store is opened
        older_than = _age_seconds(args.older_than) if args.older_than else None
        graph = _graph_hash(args.graph) if args.graph else None
    store = _existing_store(args.store)
    if args.store_action == "stats":
        figures = store.stats()
        if args.json:
            print_json(figures)
        else:
            solvers = ", ".join(f"{name} {count}" for name, count in figures["solvers"].items()) or "none"
            statuses = ", ".join(f"{count} {status}" for status, count in figures["statuses"].items()) or "none"
            sys.stdout.write(f"{figures['path']}: {figures['entries']} results ({statuses}), "
                             f"{format_bytes(figures['bytes'])}, {figures['graphs']} graphs\n"
                             f"solvers: {solvers}\nstored from {figures['oldest'] or '-'} to "
                             f"{figures['newest'] or '-'}\n")
    elif args.store_action == "export":
        _export(store.rows(), args.format, args.output)
    else:
        removed = store.prune(older_than=older_than, graph=graph, everything=args.all)
        sys.stderr.write(f"pruned {removed} results from {store.path}\n")
    return EXIT_OK


def _existing_store(explicit: str | None) -> ResultStore:
    path = store_path(explicit)
    if path is None:
        raise StoreError("the results store is off (REMAT_STORE=off); name one with --store PATH")
    if not path.is_file():
        raise StoreError(f"no results store at {path}: nothing has been stored there yet (solve, compare, sweep "
                         f"and study write it); check --store or REMAT_STORE")
    return ResultStore(path)


def _export(rows: list[dict], fmt: str, output: str | None) -> None:
    stream = open(output, "w", newline="") if output else sys.stdout
    try:
        if fmt == "json":
            stream.write(json.dumps(rows, indent=1) + "\n")
        else:
            writer = csv.DictWriter(stream, fieldnames=EXPORT_COLUMNS)
            writer.writeheader()
            writer.writerows({**row, "options": json.dumps(row["options"], sort_keys=True)} for row in rows)
    finally:
        if output:
            stream.close()
    if output:
        sys.stderr.write(f"wrote {output}: {len(rows)} results\n")


def _age_seconds(text: str) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if not match:
        raise StoreError(f"--older-than takes an age such as 30d, 12h, 90m, 45s or 2w; got {text!r}")
    return float(match[1]) * AGE_UNITS[match[2]]


def _graph_hash(text: str) -> str:
    if Path(text).is_file():
        return load_graph(text).content_hash
    if not re.fullmatch(r"[0-9a-f]{6,64}", text):
        raise StoreError(f"--graph takes a graph's content hash (6 to 64 hex digits; 'info GRAPH' prints it) or a "
                         f"graph file; got {text!r}")
    return text


def add_study_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("study", help="graphs x solvers x budgets, resumable through the results store: a CSV and "
                                     "JSON table and a Pareto figure per graph",
                       description="Solves every graph with every solver at every budget. What the results store "
                                   "holds is not solved again, so a study interrupted and started again finishes "
                                   "the rest. Writes DIR/results.csv, DIR/results.json and DIR/pareto-GRAPH.html.")
    p.add_argument("graphs", nargs="+", metavar="GRAPH_OR_MODEL",
                   help="a graph file, or a zoo model name (or .onnx/.pt2 file) traced as 'trace' does")
    p.add_argument("--solvers", required=True, help="comma-separated solver names")
    p.add_argument("--budgets", required=True,
                   help="comma-separated budgets: percents of each graph's checkpoint-all peak (60%%,80%%), bytes "
                        "or bytes with a unit")
    p.add_argument("--time-limit", type=float, default=None, help="seconds per solve for the solvers that search")
    p.add_argument("--out", default="study", metavar="DIR", help="where to write the results (default ./study)")
    p.add_argument("--level", choices=("op", "module"), default="op", help="traced models: op (default) or module "
                                                                           "level")
    p.add_argument("--batch", type=int, default=None, help="traced models: the batch size (default: the model's)")
    p.add_argument("--cost", choices=COST_MODELS, default="flops",
                   help="traced models: node costs, as 'trace' takes them (default flops)")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="traced models: a zoo model option (image_size=128, depth=4) or an ONNX symbolic dimension, "
                        "as 'trace' takes it (repeatable; every traced model gets it)")
    add_link_args(p, "a transfer lane to the host for every solve (offloading solvers may use it; results.csv gets "
                     "each schedule's makespan)")
    add_store_args(p)
    add_backend_args(p)


def cmd_study(args: argparse.Namespace) -> int:
    solvers, budgets = comma_list(args.solvers), comma_list(args.budgets)
    if not solvers:
        raise UnknownSolver(f"--solvers {args.solvers!r} names no solver; give e.g. --solvers rotor,dtr "
                            f"('solvers' lists them)")
    for solver in solvers:
        get_solver(solver)
    backend, store, link = backend_of(args), store_of(args), link_of(args)
    options = option_args(args.option)
    graphs = [load_study_graph(source, args.level, args.batch, args.cost, options) for source in args.graphs]
    total = len({cell for _, _, cell in study_cells(graphs, solvers, budgets, args.time_limit)})
    progress = ProgressBar(total, "study")
    started = time.monotonic()
    try:
        study = run_study(graphs, solvers, budgets, args.time_limit, backend, store, progress, link)
    except KeyboardInterrupt:
        progress.finish()
        where = f"are in the results store {store.path}" if store is not None else "are lost (--no-store)"
        sys.stderr.write(f"interrupted after {progress.done} of {total} solves; those {where}: run the same "
                         f"command again to resume\n")
        raise
    progress.finish()
    written = write_study(study, args.out)
    _print_study(study)
    stored = sum(o.from_store for o in study.outcomes.values())
    sys.stderr.write(f"study: {len(study.outcomes)} solves ({stored} from the store) on {backend.describe()} in "
                     f"{time.monotonic() - started:.1f} s; wrote {', '.join(str(p) for p in written)}\n")
    if study.failures:
        sys.stderr.write(f"{len(study.failures)} solves failed (status 'error' in results.csv); the first:\n")
        return outcome_exit(study.failures[0])
    return EXIT_OK


def _print_study(study: Study) -> None:
    headers = ("graph", "solver", "budget", "status", "overhead", "seconds", "stored")
    lines = [[r.graph, r.solver, r.budget, r.status, f"{r.overhead:+.1%}" if r.overhead is not None else "-",
              f"{r.seconds:.3f}", "yes" if r.from_store else ""] for r in study.rows]
    sys.stdout.write("\n".join(line.rstrip() for line in aligned(headers, lines)) + "\n")


COMMANDS: dict[str, Command] = {
    "study": (add_study_parser, cmd_study),
    "store": (add_store_parser, cmd_store),
}
