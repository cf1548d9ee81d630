"""SAR against vanilla domain-parallel full-batch training, per worker, simulated and measured on gloo processes.

1. A dense generated graph (R-MAT with equal quadrants: no degree skew, so that every worker needs most of the
   others' rows, SAR's regime): 100,000 nodes, 2,000,000 directed edges, 64 features, METIS. GraphSAGE (mean) and
   GAT (4 heads), 2 layers, width 64. Each worker's peak for 1, 2, 4 and 8 workers, simulated (the one simulator on
   each worker's recorded step) and measured (real workers on this machine, one thread each: the one meter over one
   step after a warm-up), vanilla and SAR; GAT also with its edges in the chunk the simulator finds best (our "SAR
   with what else to recompute chosen"). Gradients against one process on the whole graph.
2. A skewed graph (R-MAT with Graph500's quadrants, isolated nodes dropped, about 2,000,000 directed edges): the
   largest partition's share of nodes and edges under METIS balancing edges and balancing nodes, and what it does to
   SAR's gain (GraphSAGE, 4 workers).

The paper's figures (ogbn-papers100M, read off its charts) are printed beside. Writes
``docs/figures/distributed-gnn.json``, ``docs/figures/distributed-gnn.png`` and the tables of
``docs/distributed-gnn.md`` (between its markers).

Run: PYTHONPATH=$PWD .venv/bin/python bench/sar.py [--no-write] [--no-measure] [--nodes 100000 --edges 2000000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

from remat_core.frontends.gnn import GnnModel, partition_graph, rmat_graph
from remat_core.graph import format_bytes
from remat_core.run.distributed import best_chunk, run_distributed, simulate_workers

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "distributed-gnn.md"
DATA = ROOT / "docs" / "figures" / "distributed-gnn.json"
FIGURE = ROOT / "docs" / "figures" / "distributed-gnn.png"
BEGIN, END = "<!-- bench/sar.py: begin -->", "<!-- bench/sar.py: end -->"
UNIFORM = (0.25, 0.25, 0.25)
WORKERS = (1, 2, 4, 8)
PAPER = {"graphsage": {32: 95 / 150, 64: 47 / 83, 128: 25 / 50}, "gat": {64: 34 / 126, 128: 19 / 75}}
"""SAR / vanilla peak per machine on ogbn-papers100M, read off the paper's charts (vanilla GAT at 32: out of memory)."""


def peaks(workers) -> list[int]:
    return [w.peak for w in workers]


def dense_rows(graph, measure: bool) -> list[dict]:
    rows = []
    for name in ("graphsage", "gat"):
        model = GnnModel(name, graph.features.shape[1], graph.classes, width=64, layers=2, heads=4)
        for k in WORKERS:
            started = time.perf_counter()
            partition = partition_graph(graph, k)
            row = {"model": name, "workers": k, "edge_cut": partition.edge_cut()}
            setups = [("vanilla", None), ("sar", None)]
            if name == "gat":
                setups.append(("sar", best_chunk(partition, model)[0]))
            for mode, chunk in setups:
                key = mode if chunk is None else "sar_chunked"
                simulated = simulate_workers(partition, model, mode, chunk)
                entry = {"chunk": chunk, "simulated": peaks(simulated),
                         "received": [sum(w.received.values()) for w in simulated],
                         "flops": [w.cost for w in simulated]}
                if measure and k > 1:
                    run = run_distributed(graph, partition, model, mode, chunk=chunk, timeout=1800,
                                          measure_reference=False)
                    entry.update(measured=[w["peak"] for w in run.workers], gradient_error=run.gradient_error,
                                 measured_received=[w["traffic"]["received"] for w in run.workers],
                                 step_seconds=max(w["seconds"] for w in run.workers))
                row[key] = entry
            print(f"{name} k={k}: " + ", ".join(f"{key} {format_bytes(max(row[key]['simulated']))}"
                                               + (f" (measured {format_bytes(max(row[key]['measured']))})"
                                                  if "measured" in row[key] else "")
                                               for key in ("vanilla", "sar", "sar_chunked") if key in row)
                  + f" [{time.perf_counter() - started:.0f} s]", flush=True)
            rows.append(row)
    return rows


def skewed_rows(measure: bool, nodes: int, edges: int) -> list[dict]:
    graph = rmat_graph(nodes, edges, features=64, classes=16, seed=0)
    model = GnnModel("graphsage", 64, graph.classes, width=64)
    rows = []
    for balance in ("edges", "nodes"):
        partition = partition_graph(graph, 4, balance=balance)
        node_counts, edge_counts = partition.node_counts(), partition.edge_counts()
        row = {"graph": graph.describe(), "balance": balance, "edge_cut": partition.edge_cut(),
               "largest_nodes_share": float(node_counts.max() / node_counts.sum()),
               "largest_edges_share": float(edge_counts.max() / edge_counts.sum())}
        for mode in ("vanilla", "sar"):
            row[mode] = {"simulated": peaks(simulate_workers(partition, model, mode))}
            if measure:
                run = run_distributed(graph, partition, model, mode, timeout=1800, measure_reference=False)
                row[mode].update(measured=[w["peak"] for w in run.workers], gradient_error=run.gradient_error)
        print(f"skewed, METIS balancing {balance}: cut {row['edge_cut']:.1%}, largest worker "
              f"{row['largest_nodes_share']:.0%} of nodes, {row['largest_edges_share']:.0%} of edges", flush=True)
        rows.append(row)
    return rows


def _ratio(row: dict, key: str, field: str = "simulated") -> str:
    if field not in row.get(key, {}) or field not in row["vanilla"]:
        return "-"
    return f"{max(row[key][field]) / max(row['vanilla'][field]):.2f}"


def _mb(row: dict, key: str, field: str) -> str:
    return f"{max(row[key][field]) / 1e6:.1f}" if field in row.get(key, {}) else "-"


def tables(result: dict) -> str:
    graph = result["dense_graph"]
    lines = [f"Measured {result['date']} on this project's machine (2 cores, torch 2.13 CPU, one thread per worker). "
             f"Dense graph: {graph['nodes']:,} nodes, {graph['edges']:,} directed edges, {graph['features']} "
             f"features, METIS. Peaks in MB (10^6 bytes): the largest worker's step, above its resident features, "
             f"shards and weights.", "",
             "| model | workers | edge cut | vanilla sim | vanilla meas | SAR sim | SAR meas | SAR/vanilla sim | "
             "SAR/vanilla meas | SAR+chunks sim | SAR+chunks meas | SAR+chunks/vanilla | gradient difference |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["dense"]:
        errors = [row[k]["gradient_error"] for k in ("vanilla", "sar", "sar_chunked") if "gradient_error" in row.get(k, {})]
        chunked = row.get("sar_chunked")
        lines.append(
            f"| {row['model']} | {row['workers']} | {row['edge_cut']:.0%} | {_mb(row, 'vanilla', 'simulated')} | "
            f"{_mb(row, 'vanilla', 'measured')} | {_mb(row, 'sar', 'simulated')} | {_mb(row, 'sar', 'measured')} | "
            f"{_ratio(row, 'sar')} | {_ratio(row, 'sar', 'measured')} | "
            + (f"{_mb(row, 'sar_chunked', 'simulated')} ({chunked['chunk'] or 'whole'}) | "
               f"{_mb(row, 'sar_chunked', 'measured')} | {_ratio(row, 'sar_chunked')} | " if chunked else "- | - | - | ")
            + (f"{max(errors):.1e} |" if errors else "- |"))
    lines += ["", "Measured over simulated, every worker of every run above: "
              + ", ".join(f"{lo:.3f} to {hi:.3f} ({mode})" for mode, (lo, hi) in result["fidelity"].items()) + ".",
              "", "The paper (ogbn-papers100M, SAR / vanilla per machine, read off its charts): "
              + "; ".join(f"{name} " + ", ".join(f"{r:.2f} at {k}" for k, r in figures.items())
                          for name, figures in PAPER.items()) + " (vanilla GAT at 32 machines: out of memory).", ""]
    skew = result["skewed"]
    if skew:
        g = skew[0]["graph"]
        lines += [f"Skewed graph (R-MAT, Graph500 quadrants, isolated nodes dropped): {g['nodes']:,} nodes, "
                  f"{g['edges']:,} edges, largest in-degree {g['max_in_degree']:,}; GraphSAGE, 4 workers.", "",
                  "| METIS balances | edge cut | largest worker: nodes | largest worker: edges | vanilla sim | "
                  "SAR sim | SAR/vanilla sim | SAR/vanilla meas |", "|---|---|---|---|---|---|---|---|"]
        for row in skew:
            lines.append(f"| {row['balance']} | {row['edge_cut']:.0%} | {row['largest_nodes_share']:.0%} | "
                         f"{row['largest_edges_share']:.0%} | {_mb(row, 'vanilla', 'simulated')} | "
                         f"{_mb(row, 'sar', 'simulated')} | {_ratio(row, 'sar')} | {_ratio(row, 'sar', 'measured')} |")
    return "\n".join(lines)


def fidelity(rows: list[dict]) -> dict:
    spans = {}
    for row in rows:
        for key in ("vanilla", "sar", "sar_chunked"):
            entry = row.get(key, {})
            for m, s in zip(entry.get("measured", []), entry.get("simulated", [])):
                lo, hi = spans.get(key, (float("inf"), 0.0))
                spans[key] = (min(lo, m / s), max(hi, m / s))
    return spans


def figure(result: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, name in zip(axes, ("graphsage", "gat")):
        rows = [r for r in result["dense"] if r["model"] == name]
        ks = [r["workers"] for r in rows]
        for key, label, colour in (("vanilla", "vanilla", "#c0392b"), ("sar", "SAR", "#2471a3"),
                                   ("sar_chunked", "SAR + edge chunks", "#229954")):
            if key not in rows[0]:
                continue
            ax.plot(ks, [max(r[key]["simulated"]) / 1e6 for r in rows], "-o", color=colour, label=f"{label} (sim.)")
            measured = [(r["workers"], max(r[key]["measured"]) / 1e6) for r in rows if "measured" in r[key]]
            if measured:
                ax.plot(*zip(*measured), "x", color=colour, markersize=9, label=f"{label} (measured)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)  # 1/N is a straight line
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("workers")
        ax.set_ylabel("largest worker's step peak (MB)")
        ax.set_title(f"{name}, {result['dense_graph']['edges']:,} edges")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--no-measure", action="store_true", help="simulated figures only")
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=2_000_000)
    args = parser.parse_args()
    graph = rmat_graph(args.nodes, args.edges, features=64, classes=16, probabilities=UNIFORM, seed=0)
    dense = dense_rows(graph, not args.no_measure)
    result = {"date": datetime.date.today().isoformat(), "dense_graph": graph.describe(), "dense": dense,
              "fidelity": fidelity(dense),
              "skewed": skewed_rows(not args.no_measure, 1 << 17, args.edges)}
    text = tables(result)
    print(text)
    if not args.no_write:
        DATA.write_text(json.dumps(result, indent=1) + "\n")
        figure(result)
        doc = DOC.read_text()
        start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        DOC.write_text(doc[:start] + "\n" + text + "\n" + doc[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
