"""PyTorch's own partitioner beside our solvers: peak against recomputation, budget fraction by fraction.

Run: PYTHONPATH=$PWD .venv/bin/python bench/torch_partitioner_curve.py [--checkmate ../shared/graphs/checkmate]

For each graph, every ``activation_memory_budget`` fraction the ``torch-partitioner`` search
evaluated (its simulated peak and cost) and the Pareto sweeps of ``rotor`` and ``dtr`` (20
budgets from the lower bound to the checkpoint-all peak). Graphs: a 12-block residual MLP and
ResNet-18 traced here (torch's partitioner on their joint FX graphs), and a Checkmate training
graph read from a file when ``--checkmate`` names their folder (torch's knapsack rules on its
sizes). Writes docs/figures/torch-partitioner-curve.png and .json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from remat_core import ComputeGraph, checkpoint_all_cost, checkpoint_all_peak, load_graph, memory_lower_bound, sweep
from remat_core.frontends import trace_training_graph, trace_zoo_model
from remat_core.solvers.peers.torch_partitioner import torch_partition_curve

ROOT = Path(__file__).resolve().parents[1]
OURS = ("rotor", "dtr")
POINTS = 20


def residual_mlp() -> ComputeGraph:
    """The 12-block model the stack notes measured torch.compile's budget on (width 256, so that it traces in
    seconds): the tests' own (tests/tiny_models.py)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_models import residual_mlp as build

    model, inputs = build(width=256, depth=12, batch=32, tokens=16)
    return trace_training_graph(model, inputs, name="residual MLP (12 blocks)")


def curves(graph: ComputeGraph) -> dict:
    """Torch's points and our sweeps, peaks as shares of the checkpoint-all activations, costs as overheads."""
    pinned, peak, base = graph.pinned_bytes, checkpoint_all_peak(graph), checkpoint_all_cost(graph)

    def share(p: int) -> float:
        return (p - pinned) / (peak - pinned)

    curve = torch_partition_curve(graph)
    doc = {"graph": graph.name, "mode": curve.mode, "torch": [
        {"fraction": p.fraction, "peak": share(p.peak), "overhead": p.cost / base - 1} for p in curve.points]}
    low = memory_lower_bound(graph)
    budgets = [int(low + (peak - low) * k / (POINTS - 1)) for k in range(POINTS)]
    for name in OURS:
        doc[name] = [{"peak": share(o.stats["peak"]), "overhead": o.stats["overhead"]}
                     for o in sweep(graph, budgets, name) if o.feasible]
    return doc


def plot(docs: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(docs), figsize=(5.2 * len(docs), 4.2), squeeze=False)
    for ax, doc in zip(axes[0], docs):
        for name, style in zip(OURS, ("-o", "-s")):
            points = sorted((p["peak"], p["overhead"]) for p in doc[name])
            ax.plot([p for p, _ in points], [100 * o for _, o in points], style, ms=3, label=name)
        fractions = [p for p in doc["torch"] if p["fraction"] is not None]
        shown = ax.scatter([p["peak"] for p in fractions], [100 * p["overhead"] for p in fractions],
                           c=[p["fraction"] for p in fractions], cmap="viridis", marker="D", s=28, zorder=3,
                           label="torch-partitioner (colour: fraction)")
        fig.colorbar(shown, ax=ax, label="activation_memory_budget")
        ax.set_title(f"{doc['graph']}\n(torch {doc['mode']} mode)", fontsize=9)
        ax.set_xlabel("simulated peak / checkpoint-all (activations)")
        ax.set_ylabel("recomputation overhead (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkmate", help="folder of Checkmate node-link graphs (a training graph of it is used)")
    args = parser.parse_args()
    graphs = [residual_mlp(), trace_zoo_model("resnet18", 4, image_size=112)]
    if args.checkmate:
        graphs.append(load_graph(sorted(Path(args.checkmate).glob("VGG16*_train_*.json"))[0]))
    docs = []
    for graph in graphs:
        docs.append(curves(graph))
        print(f"{graph.name}: {len(docs[-1]['torch'])} torch points ({docs[-1]['mode']})", file=sys.stderr, flush=True)
    out = ROOT / "docs" / "figures" / "torch-partitioner-curve"
    out.with_suffix(".json").write_text(json.dumps(docs, indent=1) + "\n")
    plot(docs, out.with_suffix(".png"))
    print(f"wrote {out}.png and .json")


if __name__ == "__main__":
    main()
