"""The commands about graphs too big for one machine: ``partition`` (a GNN's graph split across workers)."""

from __future__ import annotations

import argparse
import sys

from ..errors import GraphError
from ..frontends.gnn import PARTITIONERS, GnnGraph, partition_graph, read_gnn_graph, rmat_graph
from ._common import EXIT_OK, Command, aligned, print_json

RMAT_SETTINGS = {"nodes": int, "edges": int, "features": int, "classes": int, "seed": int}


def gnn_graph(text: str) -> GnnGraph:
    """The graph a ``GRAPH`` argument names: ``rmat:nodes=N,edges=E[,features=F,classes=C,seed=S]`` or a file.

    Raises
    ------
    GraphError
        For a setting that is not one of R-MAT's, a value that is not a whole number, or a file that cannot be read.
    """
    if not text.startswith("rmat:") and text != "rmat":
        return read_gnn_graph(text)
    settings: dict[str, int] = {"nodes": 100_000, "edges": 1_000_000}
    for part in filter(None, text.partition(":")[2].split(",")):
        name, _, value = part.partition("=")
        if name.strip() not in RMAT_SETTINGS:
            raise GraphError(f"{text}: unknown R-MAT setting {name.strip()!r}; use {', '.join(RMAT_SETTINGS)}")
        if not value.strip().isdigit():
            raise GraphError(f"{text}: {name.strip()}={value.strip()!r} is not a whole number")
        settings[name.strip()] = int(value)
    return rmat_graph(settings.pop("nodes"), settings.pop("edges"), **settings)


def add_partition_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("partition", help="split a GNN's graph across workers and report the edge cut, the balance "
                                         "and each worker's halo (the remote nodes it needs)")
    p.add_argument("graph", help="rmat:nodes=N,edges=E[,features=F,classes=C,seed=S] (generated, nothing "
                                 "downloaded), or an edge list (.txt/.edges/.el/.csv/.tsv), .npz or .pt file")
    p.add_argument("--workers", "-k", type=int, default=4, help="workers (default 4)")
    p.add_argument("--method", choices=PARTITIONERS, default="metis", help="metis (default) or random")
    p.add_argument("--balance", choices=("edges", "nodes"), default="edges",
                   help="what METIS balances: the edges each worker aggregates (default) or its nodes")
    p.add_argument("--seed", type=int, default=0, help="the partitioner's seed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def cmd_partition(args: argparse.Namespace) -> int:
    graph = gnn_graph(args.graph)
    partition = partition_graph(graph, args.workers, args.method, seed=args.seed, balance=args.balance)
    report = {"graph": graph.describe(), **partition.summary()}
    if args.json:
        print_json(report)
        return EXIT_OK
    described = report["graph"]
    lines = aligned(["worker", "nodes", "edges in", "halo (remote nodes needed)"],
                    [[str(w["worker"]), f"{w['nodes']:,}", f"{w['edges_in']:,}", f"{w['halo']:,}"]
                     for w in report["per_worker"]])
    sys.stdout.write(f"{described['name']}: {described['nodes']:,} nodes, {described['edges']:,} edges; {args.method} "
                     f"into {partition.workers}: edge cut {report['edge_cut']:.1%}, node balance "
                     f"{report['node_balance']:.2f}, edge balance {report['edge_balance']:.2f} (largest over "
                     f"mean)\n" + "\n".join(line.rstrip() for line in lines) + "\n")
    return EXIT_OK


COMMANDS: dict[str, Command] = {
    "partition": (add_partition_parser, cmd_partition),
}
