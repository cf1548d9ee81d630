"""Command line: ``python -m remat_core <command> ...``.

Exit codes: 0 success; 1 invalid schedule (the message names the step); 2 bad input (bad file, bad
graph, bad budget text, unknown solver, a model that cannot be traced, a model too big for the
machine's memory: a message on stderr, no traceback unless ``--debug``); 3 infeasible budget, proved
or after the solver's whole search (the message gives the budget asked and the smallest known
feasible one); 4 internal error (any other exception: a bug of this package, not of the input; one
line asking for a report, the traceback with ``--debug``); 5 stopped at the time limit before a
schedule within the budget was found (not a proof: the message says what was tried, the smallest
budget known to fit, and that a longer ``--time-limit`` may find one); 130 interrupted (Ctrl-C).

Each command is a pair: ``add_<name>_parser(subparsers)`` declares it and ``cmd_<name>(args)``
runs it and returns the exit code. The commands live in one module per kind of work (``graphs``,
``solving``, ``comparing``, ``studies``, ``models``, ``gnn``), each with a ``COMMANDS`` table; this module lists those
modules once, in the order ``--help`` shows them, and maps exceptions to exit codes.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

from ..errors import InfeasibleBudget, InvalidSchedule, RematError, SearchStopped, first_line
from ..solvers import highs_left_running
from . import comparing, gnn, graphs, models, solving, studies
from ._common import (EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERNAL_ERROR, EXIT_INVALID_SCHEDULE, EXIT_OK,
                      EXIT_STOPPED, Command)

EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT, as shells report it)."""

COMMANDS: dict[str, Command] = {**solving.COMMANDS, **graphs.COMMANDS, **comparing.COMMANDS, **studies.COMMANDS,
                                **models.COMMANDS, **gnn.COMMANDS}
"""Every command by name, in the order ``--help`` lists them."""

__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "EXIT_INFEASIBLE", "EXIT_INTERNAL_ERROR", "EXIT_INVALID_SCHEDULE", "EXIT_OK",
           "EXIT_STOPPED",
           "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m remat_core",
                                     description="Remat Explorer: tensor rematerialization schedules for training graphs.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_parser, _ in COMMANDS.values():
        add_parser(sub)
    return parser


VALUE_OPTIONS = ("--budget", "-b", "--budgets")
"""Options whose value may start with '-' (a negative budget): kept as their value, so the budget's own message
says what is wrong, not argparse's "expected one argument"."""


def _values_kept(argv: list[str]) -> list[str]:
    out: list[str] = []
    k = 0
    while k < len(argv):
        if argv[k] in VALUE_OPTIONS and k + 1 < len(argv) and argv[k + 1].startswith("-") and argv[k + 1] != "--":
            out.append(f"{argv[k]}={argv[k + 1]}" if argv[k].startswith("--") else f"{argv[k]}{argv[k + 1]}")
            k += 2
            continue
        out.append(argv[k])
        k += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code."""
    args = build_parser().parse_args(_values_kept(sys.argv[1:] if argv is None else list(argv)))
    if args.debug:
        logging.getLogger("remat_core").setLevel(logging.DEBUG)  # the tracer then keeps torch's own logs
    try:
        code = COMMANDS[args.command][1](args)
    except InvalidSchedule as e:
        code = _fail(args, e, EXIT_INVALID_SCHEDULE)
    except SearchStopped as e:
        code = _fail(args, e, EXIT_STOPPED)
    except InfeasibleBudget as e:
        code = _fail(args, e, EXIT_INFEASIBLE)
    except (RematError, OSError, MemoryError) as e:
        code = _fail(args, e, EXIT_BAD_INPUT)
    except Exception as e:  # not the input's fault: every bad input raises a RematError
        code = _fail(args, e, EXIT_INTERNAL_ERROR)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        code = EXIT_INTERRUPTED
    if highs_left_running():  # stopped at a time limit, it ends at its next check: do not wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


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
