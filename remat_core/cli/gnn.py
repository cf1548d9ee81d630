"""The commands about graphs too big for one machine: ``partition`` (a GNN's graph split across workers) and
``distributed`` (each worker's memory under vanilla and SAR, simulated, and measured on real workers)."""

from __future__ import annotations

import argparse
import sys

from ..errors import GraphError
from ..frontends.gnn import GNN_MODELS, PARTITIONERS, WORKER_MODES, GnnModel, gnn_graph, partition_graph
from ..graph import format_bytes
from ..run.distributed import best_chunk, simulate_workers
from ._common import EXIT_OK, Command, aligned, print_json

GRAPH_HELP = ("rmat:nodes=N,edges=E[,features=F,classes=C,seed=S,skew=graph500|uniform] (generated, nothing "
              "downloaded), or an edge list (.txt/.edges/.el/.csv/.tsv), .npz or .pt file")


def _add_partition_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", help=GRAPH_HELP)
    p.add_argument("--workers", "-k", type=int, default=4, help="workers (default 4)")
    p.add_argument("--method", choices=PARTITIONERS, default="metis", help="metis (default) or random")
    p.add_argument("--balance", choices=("edges", "nodes"), default="edges",
                   help="what METIS balances: the edges each worker aggregates (default) or its nodes")
    p.add_argument("--seed", type=int, default=0, help="the partitioner's seed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def add_partition_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("partition", help="split a GNN's graph across workers and report the edge cut, the balance "
                                         "and each worker's halo (the remote nodes it needs)")
    _add_partition_args(p)


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


def add_distributed_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("distributed", help="a GNN trained full-batch across workers: each worker's memory under "
                                           "vanilla domain-parallel training and SAR, simulated, then measured on "
                                           "real workers (torch.distributed on gloo, or Ray actors)")
    p.add_argument("model", choices=sorted(GNN_MODELS), help="the zoo GNN")
    _add_partition_args(p)
    p.add_argument("--mode", choices=(*WORKER_MODES, "both"), default="both",
                   help="vanilla (every remote row of a layer fetched at once and kept for the backward), sar (one "
                        "remote worker at a time, freed, fetched again in the backward where needed) or both "
                        "(default)")
    p.add_argument("--chunk", default=None, help="SAR's attention processes at most this many edges at once (a "
                                                 "number), or 'auto': the chunk the simulator finds least memory "
                                                 "with (GAT)")
    p.add_argument("--width", type=int, default=64, help="hidden units per layer (default 64)")
    p.add_argument("--layers", type=int, default=2, help="message-passing layers (default 2)")
    p.add_argument("--heads", type=int, default=4, help="GAT's attention heads (default 4)")
    p.add_argument("--steps", type=int, default=1, help="training steps (SGD); the first is measured and its "
                                                        "gradients compared with one process (default 1)")
    p.add_argument("--simulate-only", action="store_true", help="only the simulated figures: start no workers")
    p.add_argument("--backend", choices=("processes", "ray"), default="processes",
                   help="processes on this machine (default) or Ray actors (a local Ray, or --ray-address)")
    p.add_argument("--ray-address", default=None, help="a running Ray cluster to start the workers on")
    p.add_argument("--port", type=int, default=None, help="the gloo rendezvous port on 127.0.0.1 (default: a free "
                                                          "one)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds the workers may take (default 600)")


def _chunk(text: str | None, partition, model: GnnModel) -> int | None:
    if text is None:
        return None
    if text == "auto":
        return best_chunk(partition, model)[0]
    if not text.isdigit() or int(text) < 1:
        raise GraphError(f"--chunk {text!r}: give a positive number of edges or 'auto'")
    return int(text)


def cmd_distributed(args: argparse.Namespace) -> int:
    graph = gnn_graph(args.graph)
    for name in ("width", "layers", "heads", "steps"):
        if getattr(args, name) < 1:
            raise GraphError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.model == "gat" and args.width < args.heads:
        raise GraphError(f"--width {args.width} gives GAT's {args.heads} heads no channels; use a width of at least "
                         f"--heads")
    partition = partition_graph(graph, args.workers, args.method, seed=args.seed, balance=args.balance)
    model = GnnModel(args.model, int(graph.features.shape[1]), max(graph.classes, 2), args.width, args.layers,
                     args.heads)
    chunk = _chunk(args.chunk, partition, model)
    modes = WORKER_MODES if args.mode == "both" else (args.mode,)
    report = {"graph": graph.describe(), "partition": partition.summary(), "model": model.__dict__, "chunk": chunk,
              "modes": {}}
    for mode in modes:
        simulated = simulate_workers(partition, model, mode, chunk)
        entry = {"simulated": [{"worker": w.rank, "peak": w.peak, "flops": w.cost, **w.traffic()}
                               for w in simulated]}
        if not args.simulate_only:
            from ..run.distributed import run_distributed

            run = run_distributed(graph, partition, model, mode, steps=args.steps, chunk=chunk, backend=args.backend,
                                  ray_address=args.ray_address, port=args.port, timeout=args.timeout,
                                  progress=lambda text: sys.stderr.write(text + "\n") if not args.json else None)
            entry["measured"] = run.summary()
        report["modes"][mode] = entry
    if args.json:
        print_json(report)
    else:
        _print_distributed(report, partition)
    failed = any(not entry["measured"]["gradients_match"] for entry in report["modes"].values() if "measured" in entry)
    return EXIT_OK if not failed else 1


def _print_distributed(report: dict, partition) -> None:
    described, cut = report["graph"], report["partition"]
    out = [f"{described['name']}: {described['nodes']:,} nodes, {described['edges']:,} edges; {cut['method']} into "
           f"{cut['workers']}: edge cut {cut['edge_cut']:.1%}, node balance {cut['node_balance']:.2f}, edge balance "
           f"{cut['edge_balance']:.2f}"]
    peaks = {}
    for mode, entry in report["modes"].items():
        measured = entry.get("measured")
        rows = []
        for w in entry["simulated"]:
            row = [str(w["worker"]), format_bytes(w["peak"]), format_bytes(w["received"])]
            if measured:
                m = measured["per_worker"][w["worker"]]
                row += [format_bytes(m["peak"]), f"{m['peak'] / max(w['peak'], 1):.3f}",
                        format_bytes(m["traffic"]["received"]), f"{m['seconds']:.2f}"]
            rows.append(row)
        header = ["worker", "simulated peak", "received"] + (
            ["measured peak", "measured/simulated", "received", "step s"] if measured else [])
        chunk = f", attention in chunks of {report['chunk']:,} edges" if mode == "sar" and report["chunk"] else ""
        out.append(f"\n{mode}{chunk}:")
        out += [line.rstrip() for line in aligned(header, rows)]
        peaks[mode] = max(w["peak"] for w in entry["simulated"])
        if measured:
            verdict = "equal" if measured["gradients_match"] else "DIFFER"
            out.append(f"gradients {verdict} to one process on the whole graph (relative difference "
                       f"{measured['gradient_error']:.1e} in float64, {measured['float32_gradient_error']:.1e} in the "
                       f"measured float32 step); loss {measured['losses'][0]:.4f} (one process "
                       f"{measured['reference_losses'][0]:.4f})")
            peaks[mode + " measured"] = max(m["peak"] for m in measured["per_worker"])
    if "vanilla" in peaks and "sar" in peaks:
        line = f"\nSAR / vanilla, largest worker: simulated {peaks['sar'] / peaks['vanilla']:.2f}"
        if "sar measured" in peaks:
            line += f", measured {peaks['sar measured'] / peaks['vanilla measured']:.2f}"
        out.append(line)
    sys.stdout.write("\n".join(out) + "\n")


COMMANDS: dict[str, Command] = {
    "partition": (add_partition_parser, cmd_partition),
    "distributed": (add_distributed_parser, cmd_distributed),
}
