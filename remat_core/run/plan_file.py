"""A plan saved beside a training script (``rematerialize(..., plan="plan.json")``) and read back at its next start.

The file holds the schedule, the route and budget it was made for, the peak the route promised, and a digest of
what a schedule depends on in the traced graph (node ids, sizes, pinned nodes, edges, outputs: not the costs, which
are timings of one run). Read back, it is refused, naming what differs, when the model traces to another graph, or
the call asks for another route or budget; the schedule is simulated again on the graph before it is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ExecutionError
from ..frontends import structural_fingerprint
from ..graph import ComputeGraph, format_bytes
from ..schedule import Schedule

FORMAT, VERSION = "remat-plan", 1


def save_plan(path: str | Path, graph: ComputeGraph, schedule: Schedule, route: str, budget: int, solver: str,
              promised_peak: int) -> None:
    """Write the plan of ``graph`` to ``path`` (JSON)."""
    document = {"format": FORMAT, "version": VERSION, "graph": graph.name, "nodes": len(graph),
                "fingerprint": structural_fingerprint(graph), "route": route, "budget": budget, "solver": solver,
                "promised_peak": promised_peak, "schedule": schedule.to_json()}
    Path(path).write_text(json.dumps(document))


def load_plan(path: str | Path, graph: ComputeGraph, route: str, budget: int) -> Schedule:
    """The schedule saved in ``path``, once it is checked to be a plan of ``graph`` for ``route`` at ``budget``.

    Raises
    ------
    ExecutionError
        For a file that is not a saved plan, or one made for another graph, route or budget (naming what differs
        and what to do).
    """
    document = _read(path)
    fix = f"delete {path} to plan again (it is written anew), or pass another plan= path"
    saved = document["fingerprint"]
    differs = [what for what, digest in structural_fingerprint(graph).items() if saved.get(what) != digest]
    if differs:
        raise ExecutionError(f"{path} is a plan for graph {document['graph']!r} ({document['nodes']:,} nodes), and "
                             f"this model traces to {graph.name!r} ({len(graph):,} nodes) with other "
                             f"{', '.join(differs)} (another model, input shape, dtype or loss?); {fix}")
    if document["route"] != route:
        raise ExecutionError(f"{path} is a plan for via={document['route']!r}, not via={route!r}; {fix}")
    if document["budget"] != budget:
        raise ExecutionError(f"{path} is a plan for a budget of {format_bytes(document['budget'])}, not "
                             f"{format_bytes(budget)}; {fix}")
    return Schedule.from_json(document["schedule"])


def _read(path: str | Path) -> dict[str, Any]:
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExecutionError(f"cannot read the saved plan {path}: {e}; delete it to plan again") from None
    keys = {"fingerprint", "route", "budget", "schedule", "graph", "nodes"}
    if not isinstance(document, dict) or document.get("format") != FORMAT or not keys <= set(document):
        raise ExecutionError(f"{path} is not a plan saved by rematerialize (no {FORMAT!r} document); delete it, or "
                             f"pass another plan= path")
    if document.get("version") != VERSION:
        raise ExecutionError(f"{path} is a {FORMAT} of version {document.get('version')!r}; this package reads "
                             f"version {VERSION}: delete it to plan again")
    return document
