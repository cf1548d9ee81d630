"""The commands about one graph: ``info`` (its sizes), ``decompose`` (a tree or path decomposition) and
``generate`` (write a generated graph)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from ..decompose import KINDS, PATH_METHODS, TREE_HEURISTICS, decompose, separator_tree
from ..errors import GraphError
from ..graph import GRAPH_FILE_FORMATS, LAYER_ORDERS, ComputeGraph, load_graph, random_layered, save_graph
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



def add_generate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="write a generated graph: Moccasin's random layered compute DAGs (wide, "
                                        "with skip connections)")
    p.add_argument("nodes", type=int, help="number of nodes (at least 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--width", type=float, default=None,
                   help="W in (0, 1): fewer, wider layers as it grows (default: drawn from [0.25, 0.5] with the seed)")
    p.add_argument("--order", choices=LAYER_ORDERS, default="depth-first",
                   help="the topological order checkpoint-all runs in (default depth-first)")
    p.add_argument("--format", choices=GRAPH_FILE_FORMATS, default="remat-graph",
                   help="remat-graph (default) or moccasin (node-link JSON as Moccasin publishes its graphs)")
    p.add_argument("-o", "--output", required=True, help="graph file to write")


def cmd_generate(args: argparse.Namespace) -> int:
    try:
        graph = random_layered(args.nodes, width=args.width, seed=args.seed, order=args.order)
    except ValueError as e:  # the generator's parameter checks say what would work
        raise GraphError(f"cannot generate the graph: {e}") from None
    save_graph(graph, args.output, format=args.format)
    sys.stderr.write(f"wrote {args.output}: {graph.name}, {len(graph)} nodes, {len(graph.edges)} edges\n")
    return EXIT_OK


COMMANDS: dict[str, Command] = {
    "info": (add_info_parser, cmd_info),
    "decompose": (add_decompose_parser, cmd_decompose),
    "generate": (add_generate_parser, cmd_generate),
}
