"""Downloads: the graph, schedules, memory snapshots, decompositions and tables, from the pages where they appear.

Tables go out with raw numbers (bytes, fractions, seconds), not the formatted text the pages show,
so that a spreadsheet or a script can use them.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Callable, Mapping, Sequence

import streamlit as st

from remat_core import ComputeGraph, SolveOutcome
from remat_core.analysis import TensorChange, reported_gap
from remat_core.decompose import Decomposition, SeparatorTree
from remat_core.graph import node_labels


ICON = ":material/download:"


def csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows of one shape as CSV, the header from the first row's keys (empty text for no rows)."""
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def csv_download(label: str, rows: Sequence[Mapping[str, Any]], file_name: str, key: str, help: str) -> None:
    st.download_button(label, csv_text(rows), file_name=file_name, mime="text/csv", icon=ICON, on_click="ignore",
                       key=key, help=help)


def json_download(label: str, text: str | Callable[[], str], file_name: str, key: str, help: str) -> None:
    """A JSON download; ``text`` may be a callable, run only when the button is pressed (large documents)."""
    st.download_button(label, text, file_name=file_name, mime="application/json", icon=ICON, on_click="ignore",
                       key=key, help=help)


@st.cache_data(max_entries=8, show_spinner=False)
def graph_json(graph_key: str, _graph: ComputeGraph) -> str:
    """The graph as ``remat-graph`` JSON, serialised once per graph (the pages rerun often)."""
    del graph_key
    return json.dumps(_graph.to_json())


def graph_download(graph: ComputeGraph, key: str) -> None:
    json_download("Graph JSON", graph_json(graph.content_hash, graph), f"{graph.name}.json", key,
                  "The graph as remat-graph JSON: what the command line and an upload here read back.")


def schedule_download(outcome: SolveOutcome, graph: str, solver: str, budget: int, key: str) -> None:
    """A solve's schedule as JSON, unpacked and written only when the button is pressed (a 10,000-node graph's
    schedule is megabytes, and the pages that offer it rerun often)."""
    json_download("Schedule JSON", lambda: json.dumps(outcome.schedule.to_json()),
                  f"{graph}-{solver}-{budget}.schedule.json", key,
                  "The schedule as remat-schedule JSON: ops, reasons and the simulator's stats.")


def snapshot_download(snapshot: bytes, graph: str, solver: str, budget: int, key: str) -> None:
    """The caching allocator's trace of a solve as a memory snapshot (pickle, protocol 4) for PyTorch's memory_viz."""
    st.download_button("Memory snapshot", snapshot, file_name=f"{graph}-{solver}-{budget}.memory-snapshot.pickle",
                       mime="application/octet-stream", icon=ICON, on_click="ignore", key=key,
                       help="The allocator's trace and segments as PyTorch's memory snapshots hold them: drop the "
                            "file on pytorch.org/memory_viz to browse it there")


def decomposition_download(decomposition: Decomposition, separators: SeparatorTree, key: str) -> None:
    json_download(f"{decomposition.kind.capitalize()} decomposition JSON",
                  json.dumps(decomposition.to_json(separators)),
                  f"{decomposition.graph}-{decomposition.kind}-{decomposition.method}.decomposition.json", key,
                  "remat-decomposition JSON: the bags, the tree edges and the separator tree the solvers recurse on.")


def comparison_records(outcomes: Mapping[str, SolveOutcome | None], budget: int) -> list[dict[str, Any]]:
    """The solvers at one budget, one row each with raw numbers (the table the Schedule page shows)."""
    rows = []
    for name, outcome in outcomes.items():
        stats = outcome.stats if outcome is not None else {}
        status = "solving" if outcome is None else "solved" if outcome.feasible else outcome.status
        rows.append({"budget_bytes": budget, "solver": name, "status": status, "peak_bytes": stats.get("peak"),
                     "cost": stats.get("cost"), "overhead": stats.get("overhead"),
                     "recomputed_tensors": stats.get("recomputed_nodes"), "solve_seconds": stats.get("solve_seconds"),
                     "mip_gap": reported_gap(outcome.solver_info) if outcome is not None and outcome.feasible else None,
                     "smallest_feasible_bytes": outcome.smallest_feasible if outcome is not None else None})
    return rows


def diff_records(graph: ComputeGraph, changes: Sequence[TensorChange], budget_a: int,
                 budget_b: int) -> list[dict[str, Any]]:
    """The Why page's two-budget comparison, one row per tensor whose computations differ: its id (for
    programs) and its label (for people)."""
    labels = node_labels(graph)
    return [{"tensor": c.tensor, "name": labels[c.tensor], "module": graph.node(c.tensor).module,
             "change": c.change, "budget_a_bytes": budget_a, "computed_at_a": c.computes_a,
             "budget_b_bytes": budget_b, "computed_at_b": c.computes_b, "bytes": c.mem} for c in changes]
