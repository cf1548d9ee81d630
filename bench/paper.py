"""Figures for the paper's algorithms: widths, decomposition times, cost overheads, bounds vs measurements.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/paper.py [--out docs/figures] [--checkmate DIR] [--no-zoo]

Writes into ``--out``:

- ``paper-graphs.md`` / ``.json``: per graph (zoo models traced at op level, and the Checkmate
  graphs when ``--checkmate DIR`` is given): nodes, tree widths (min_degree, min_fill) and path width
  with the seconds each took, separator heights, and the ``treewidth`` solver's cost overhead at 50%
  and 25% of the checkpoint-all peak (budget-aware, with the strategy that won), beside the pure
  recursion's peak and overhead.
- ``paper-bounds.png`` / ``paper-bounds.json``: the pure TW-Remat and PW-Remat schedules on chains,
  training chains (ladders) and k-trees of growing size, measured peak and compute counts against the
  bounds derived in ``docs/algorithms.md``; and pathwidth-linear against its own.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from remat_core import (InfeasibleBudget, checkpoint_all_cost, checkpoint_all_peak, load_graph, memory_lower_bound,
                        solve)
from remat_core.decompose import path_decomposition, separator_tree, tree_decomposition
from remat_core.graph import chain, k_tree, training_chain
from remat_core.solvers.separators.recursion import plan_over_hierarchy, pure_bounds, separator_hierarchy

FRACTIONS = (0.5, 0.25)
SIZES = (16, 32, 64, 128, 256, 512, 1024)


def timed(fn, *args, **kwargs):
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - started


def graph_row(graph, source: str) -> dict:
    """Widths, times and overheads of one graph."""
    degree, degree_s = timed(tree_decomposition, graph, "min_degree")
    fill, fill_s = timed(tree_decomposition, graph, "min_fill")
    path, path_s = timed(path_decomposition, graph)
    peak, lower, base = checkpoint_all_peak(graph), memory_lower_bound(graph), checkpoint_all_cost(graph)
    row = {"graph": graph.name, "source": source, "nodes": len(graph), "edges": len(graph.edges),
           "tree_width_min_degree": degree.width, "tree_seconds_min_degree": degree_s,
           "tree_width_min_fill": fill.width, "tree_seconds_min_fill": fill_s,
           "path_width": path.width, "path_seconds": path_s, "path_from": path.info["from"],
           "separator_height_tree": separator_tree(degree).height,
           "checkpoint_all_peak": peak, "lower_bound": lower, "pinned_bytes": graph.pinned_bytes}
    pure, pure_s = timed(solve, graph, 10**18, "treewidth", budget_aware=False)
    row["pure_peak_fraction"] = pure.stats["peak"] / peak
    row["pure_overhead"] = pure.stats["overhead"]
    for fraction in FRACTIONS:
        budget = int(peak * fraction)
        key = f"at_{int(fraction * 100)}"
        if budget < lower:
            row[key] = {"budget": budget, "result": "below the lower bound"}
            continue
        try:
            schedule, seconds = timed(solve, graph, budget, "treewidth")
        except InfeasibleBudget as e:
            row[key] = {"budget": budget, "result": "infeasible", "smallest_known": e.smallest_feasible}
            continue
        row[key] = {"budget": budget, "result": "ok", "overhead": schedule.stats["cost"] / base - 1,
                    "strategy": schedule.solver_info["strategy"], "seconds": seconds}
        hierarchy = separator_hierarchy(graph, degree, separator_tree(degree))
        try:
            alone = plan_over_hierarchy(graph, budget, hierarchy, solver="treewidth", budget_aware=True,
                                        max_computes=2_000_000, other_sources=False)
            row[key]["recursion_only_overhead"] = alone.cost / base - 1
        except InfeasibleBudget:
            row[key]["recursion_only_overhead"] = None
    return row


def zoo_graphs():
    from remat_core.frontends import trace_zoo_model
    from remat_core.frontends import REGISTRY

    for name in REGISTRY:
        yield trace_zoo_model(name, level="op"), f"zoo:{name}"


def checkmate_graphs(folder: Path):
    for path in sorted(folder.glob("*_train_nx.json")):
        yield load_graph(path), f"checkmate:{path.name}"


def graphs_markdown(rows: list[dict]) -> str:
    head = ("| graph | nodes | tw min_degree (s) | tw min_fill (s) | pw (s) | height | pure TW: peak/P, overhead "
            "| TW @50% P | TW @25% P |\n|---|---|---|---|---|---|---|---|---|\n")

    def cell(result: dict) -> str:
        if result["result"] != "ok":
            return result["result"]
        winner = result["strategy"].split(",")[0].split(" +")[0].split(" (")[0]
        alone = result.get("recursion_only_overhead")
        recursion = f"{alone:+.0%}" if alone is not None else "none fits"
        return f"{result['overhead']:+.1%} ({winner}, {result['seconds']:.2f} s; recursion alone {recursion})"

    lines = [f"| {r['graph']} | {r['nodes']} | {r['tree_width_min_degree']} ({r['tree_seconds_min_degree']:.2f}) "
             f"| {r['tree_width_min_fill']} ({r['tree_seconds_min_fill']:.2f}) | {r['path_width']} "
             f"({r['path_seconds']:.2f}) | {r['separator_height_tree']} | {r['pure_peak_fraction']:.2f}, "
             f"{r['pure_overhead']:+.0%} | {cell(r['at_50'])} | {cell(r['at_25'])} |" for r in rows]
    return head + "\n".join(lines) + "\n"


# -- bounds against measurements -------------------------------------------------------------------

def bounds_rows() -> list[dict]:
    families = {"chain": lambda n: chain(n), "training chain": lambda n: training_chain(n // 2),
                "2-tree": lambda n: k_tree(n, 2, seed=n), "3-tree": lambda n: k_tree(n, 3, seed=n)}
    rows = []
    for family, make in families.items():
        for n in SIZES:
            graph = make(n)
            for solver in ("treewidth", "pathwidth"):
                d = tree_decomposition(graph) if solver == "treewidth" else path_decomposition(graph)
                hierarchy = separator_hierarchy(graph, d, separator_tree(d))
                bounds = pure_bounds(graph, hierarchy)
                s = solve(graph, 10**18, solver, budget_aware=False)
                counts = s.simulation.compute_counts
                rows.append({"family": family, "n": len(graph), "solver": solver, "width": d.width,
                             "height": hierarchy.height, "peak": s.stats["peak"], "memory_bound": bounds.memory,
                             "checkpoint_all_peak": checkpoint_all_peak(graph),
                             "max_computes": max(counts.values()),
                             "max_computes_bound": max(bounds.computes.values()),
                             "computes_per_node": s.stats["computes"] / len(graph.needed_idx)})
            lin = solve(graph, 10**18, "pathwidth-linear", budget_aware=False)
            width = path_decomposition(graph).width
            rows.append({"family": family, "n": len(graph), "solver": "pathwidth-linear", "width": width,
                         "peak": lin.stats["peak"], "sqrt_bound": 2 * math.sqrt(len(graph) * (width + 1)),
                         "checkpoint_all_peak": checkpoint_all_peak(graph),
                         "max_computes": max(lin.simulation.compute_counts.values()),
                         "max_computes_bound": 2 * (width + 1) + 1,
                         "computes_per_node": lin.stats["computes"] / len(graph.needed_idx)})
    return rows


def plot_bounds(rows: list[dict], target: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    colours = dict(zip(("chain", "training chain", "2-tree", "3-tree"), ("C0", "C1", "C2", "C3")))
    for family, colour in colours.items():
        tw = [r for r in rows if r["family"] == family and r["solver"] == "treewidth"]
        n = [r["n"] for r in tw]
        axes[0].plot(n, [r["peak"] for r in tw], "o-", color=colour, label=f"{family}: TW-Remat peak")
        axes[0].plot(n, [r["memory_bound"] for r in tw], "--", color=colour, label=f"{family}: bound")
        axes[0].plot(n, [r["checkpoint_all_peak"] for r in tw], ":", color=colour, alpha=0.5)
        axes[1].plot(n, [r["max_computes"] for r in tw], "o-", color=colour, label=f"{family}: measured")
        axes[1].plot(n, [r["max_computes_bound"] for r in tw], "--", color=colour, label=f"{family}: bound")
        lin = [r for r in rows if r["family"] == family and r["solver"] == "pathwidth-linear"]
        axes[2].plot([r["n"] for r in lin], [r["peak"] for r in lin], "o-", color=colour, label=f"{family}: peak")
        axes[2].plot([r["n"] for r in lin], [r["sqrt_bound"] for r in lin], "--", color=colour,
                     label=f"{family}: 2 sqrt(n(k+1))")
    axes[0].set(title="TW-Remat (pure): peak tensors vs bound\n(dotted: checkpoint-all)", xlabel="nodes",
                ylabel="peak (unit tensors)", xscale="log", yscale="log")
    axes[1].set(title="TW-Remat (pure): most computations of one node", xlabel="nodes", ylabel="computes",
                xscale="log", yscale="log")
    axes[2].set(title="pathwidth-linear (pure): peak vs sqrt bound\n(counts stay <= 2k+3)", xlabel="nodes",
                ylabel="peak (unit tensors)", xscale="log", yscale="log")
    for ax in axes:
        ax.legend(fontsize=6)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    parser.add_argument("--checkmate", type=Path, default=None, help="folder of Checkmate *_train_nx.json graphs")
    parser.add_argument("--no-zoo", action="store_true", help="skip tracing the zoo models")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    sources = [] if args.no_zoo else [zoo_graphs()]
    if args.checkmate is not None:
        sources.append(checkmate_graphs(args.checkmate))
    for source in sources:
        for graph, origin in source:
            rows.append(graph_row(graph, origin))
            print(json.dumps(rows[-1]), flush=True)
    (args.out / "paper-graphs.json").write_text(json.dumps(rows, indent=1))
    (args.out / "paper-graphs.md").write_text(graphs_markdown(rows))
    bounds = bounds_rows()
    (args.out / "paper-bounds.json").write_text(json.dumps(bounds, indent=1))
    plot_bounds(bounds, args.out / "paper-bounds.png")
    print(graphs_markdown(rows))


if __name__ == "__main__":
    main()
