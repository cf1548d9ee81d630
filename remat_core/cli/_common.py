"""What every command shares: exit codes, JSON output, budget and option arguments."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Sequence

from ..errors import SolverOptionError
from ..graph import ComputeGraph, parse_budget
from ..schedule import checkpoint_all_peak

EXIT_OK, EXIT_INVALID_SCHEDULE, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERNAL_ERROR = 0, 1, 2, 3, 4

Command = tuple[Callable[[argparse._SubParsersAction], None], Callable[[argparse.Namespace], int]]
"""A command: ``add_parser(subparsers)`` declares it, ``run(args)`` runs it and returns the exit code."""


def print_json(doc: Any, compact: bool = False) -> None:
    sys.stdout.write(json.dumps(doc, indent=None if compact else 2) + "\n")


def budget_arg(text: str, graph: ComputeGraph) -> int:
    """A budget argument (bytes, with a unit, or a percent of the checkpoint-all peak) in bytes."""
    return parse_budget(text, checkpoint_all_peak(graph))


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


def comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
