"""The commands about one graph: ``info`` (its sizes) and ``decompose`` (a tree or path decomposition)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from ..decompose import KINDS, PATH_METHODS, TREE_HEURISTICS, decompose, separator_tree
from ..graph import ComputeGraph, load_graph
from ..schedule import checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound
from ._common import EXIT_OK, Command, print_json


def add_info_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="sizes of a graph: nodes, edges, pinned bytes, checkpoint-all peak, lower bound")
    p.add_argument("graph", help="graph file")


def graph_info(graph: ComputeGraph) -> dict[str, Any]:
    """The summary the ``info`` command prints: sizes, baselines, and whether it is a training graph."""
    kinds = Counter(n.kind for n in graph.nodes)
    training = kinds["backward"] > 0
    about = (f"a training graph: {kinds['forward']} forward and {kinds['backward']} backward nodes" if training else
             f"a plain compute DAG, not a training graph: no backward nodes; {len(graph.outputs)} output(s)")
    return {"name": graph.name, "graph_kind": "training graph" if training else "compute DAG", "about": about,
            "nodes": len(graph), "edges": len(graph.edges), "outputs": len(graph.outputs),
            "pinned_nodes": sum(graph.pinned), "pinned_bytes": graph.pinned_bytes,
            "checkpoint_all_peak": checkpoint_all_peak(graph), "lower_bound": memory_lower_bound(graph),
            "checkpoint_all_cost": checkpoint_all_cost(graph),
            "kinds": dict(kinds), "content_hash": graph.content_hash}


def cmd_info(args: argparse.Namespace) -> int:
    info = graph_info(load_graph(args.graph))
    print_json(info)
    sys.stderr.write(f"{info['name']}: {info['about']}\n")
    return EXIT_OK


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
    print_json(decomposition.to_json(separator_tree(decomposition)))
    return EXIT_OK



COMMANDS: dict[str, Command] = {
    "info": (add_info_parser, cmd_info),
    "decompose": (add_decompose_parser, cmd_decompose),
}
