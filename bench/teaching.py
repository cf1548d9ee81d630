"""The paper's claims checked on the zoo: widths found, memory reached and recomputation, against the bounds.

Kumar et al. (NeurIPS 2019) state their recursions' memory in tensors: O(k log n) for a graph of tree
width k (TW-Remat) and O(k log n) for path width k (PW-Remat), at the price of recomputation that grows
like n^O(log k). For each zoo model traced at op level (default options) and each recursion run as the
paper states it (``budget_aware=False``), this measures:

- n (computed nodes), the width k found and the separator tree's height h;
- the most tensors resident at once (pinned ones left out: the unit-size reading of the memory claims)
  beside checkpoint-all's, (k + 1) log2 n, and the bound we prove, (h + 1)(k + 1 + Δ) with Δ the
  largest in-degree (``docs/algorithms.md``, section 2);
- the peak in bytes as a fraction of checkpoint-all's (pinned memory included);
- the most computations of one node against (k + 2)^h, and the computations per node.

Writes ``teaching-claims.json`` and ``teaching-claims.md`` into ``--out`` (default ``docs/figures``).

Run: PYTHONPATH=$PWD .venv/bin/python bench/teaching.py [--out docs/figures] [--models resnet18,unet]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from remat_core import SolverLimitExceeded, checkpoint_all_peak, solve
from remat_core.decompose import path_decomposition, separator_tree, tree_decomposition
from remat_core.frontends import REGISTRY, trace_zoo_model
from remat_core.schedule import COMPUTE

SOLVERS = {"treewidth": tree_decomposition, "pathwidth": path_decomposition}


def most_resident(graph, ops) -> int:
    """The most non-pinned tensors resident at once along ``ops``."""
    live = peak = 0
    for action, _ in ops:
        live += 1 if action == COMPUTE else -1
        peak = max(peak, live)
    return peak


def row(graph, model: str, solver: str) -> dict:
    """One recursion on one model: sizes, width, memory and computations against the bounds."""
    n = sum(1 for p in graph.pinned if not p)
    decomposition = SOLVERS[solver](graph)
    height = separator_tree(decomposition).height
    k = decomposition.width
    fan_in = max((sum(1 for p in graph.pred_idx[v] if not graph.pinned[p]) for v in graph.needed_idx), default=0)
    checkpoint_all = solve(graph, checkpoint_all_peak(graph), "checkpoint-all")
    out = {"model": model, "solver": solver, "n": n, "width": k, "height": height, "bags": len(decomposition),
           "fan_in": fan_in, "checkpoint_all_resident": most_resident(graph, checkpoint_all.ops),
           "paper_style": (k + 1) * math.log2(max(n, 2)), "our_bound": (height + 1) * (k + 1 + fan_in)}
    started = time.perf_counter()
    try:
        pure = solve(graph, 10**18, solver, budget_aware=False)
    except SolverLimitExceeded as e:
        return {**out, "result": f"over the compute limit ({str(e).split(';')[0]})"}
    counts = pure.simulation.compute_counts
    return {**out, "result": "ok", "seconds": time.perf_counter() - started,
            "resident": most_resident(graph, pure.ops),
            "peak_fraction": pure.stats["peak"] / checkpoint_all.stats["peak"],
            "max_computes": max(counts.values()), "computes_bound": (k + 2) ** height,
            "computes_per_node": pure.stats["computes"] / len(counts), "overhead": pure.stats["overhead"]}


def markdown(rows: list[dict]) -> str:
    head = ("| model | recursion | n | width k | height h | tensors resident: recursion / checkpoint-all | "
            "(k+1) log2 n | (h+1)(k+1+Δ) | peak / checkpoint-all peak | most computations of a node "
            "(bound (k+2)^h) | computations per node |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        name = "TW-Remat" if r["solver"] == "treewidth" else "PW-Remat"
        common = f"| {r['model']} | {name} | {r['n']} | {r['width']} | {r['height']} |"
        if r["result"] != "ok":
            lines.append(common + f" {r['result']} | {r['paper_style']:.0f} | {r['our_bound']} | | | |")
            continue
        lines.append(common + f" {r['resident']} / {r['checkpoint_all_resident']} | {r['paper_style']:.0f} | "
                     f"{r['our_bound']} | {r['peak_fraction']:.2f} | {r['max_computes']} ({r['computes_bound']:.3g}) "
                     f"| {r['computes_per_node']:.2f} |")
    return head + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    parser.add_argument("--models", default=",".join(REGISTRY), help="comma-separated zoo names")
    args = parser.parse_args()
    rows = []
    for model in args.models.split(","):
        graph = trace_zoo_model(model, level="op")
        for solver in SOLVERS:
            rows.append(row(graph, model, solver))
            print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "teaching-claims.json").write_text(json.dumps(rows, indent=1) + "\n")
    (args.out / "teaching-claims.md").write_text(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
