"""Generated training graphs with branches, for benchmarks: a forward DAG plus its backward pass.

``training_graph(forward)`` derives the backward pass the way autodiff lays it out: one backward
node per forward node, reading the gradients of the node's consumers and the forward activations
the op needs (its inputs). ``residual_forward`` builds ResNet-like forward DAGs (two layers and a
skip connection per block, wider and cheaper activations after each downsampling).

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/training_graphs.py`` prints the sizes of the graphs
the solver benchmarks use.
"""

from __future__ import annotations

import random

from remat_core import ComputeGraph, Node, checkpoint_all_peak, memory_lower_bound
from remat_core.graph import random_dag


def training_graph(forward: ComputeGraph, backward_cost_factor: float = 2.0, name: str | None = None) -> ComputeGraph:
    """The training graph of a forward DAG: forward, a loss on its sinks, one gradient per node.

    The gradient ``d<v>`` of a computed forward node reads the gradients of v's consumers (the loss
    for a sink) and v's inputs (the activations the op's backward needs). Every gradient is an
    output; it has v's size and ``backward_cost_factor`` times its cost.
    """
    nodes = list(forward.nodes)
    edges = list(forward.edges)
    computed = [n for n in forward.nodes if not n.pinned]
    sinks = [n.id for n in computed if not forward.succs(n.id)]
    loss_mem = max(1, min(n.mem for n in computed))
    nodes.append(Node("loss", loss_mem, 1.0, "loss"))
    edges += [(s, "loss") for s in sinks]
    for node in reversed(computed):
        grad = f"d{node.id}"
        nodes.append(Node(grad, node.mem, node.cost * backward_cost_factor, "backward", label=f"grad {node.id}"))
        upstream = [f"d{s}" for s in forward.succs(node.id)] or ["loss"]
        edges += [(u, grad) for u in upstream]
        edges += [(p, grad) for p in forward.preds(node.id)]
    outputs = [f"d{n.id}" for n in computed]
    return ComputeGraph(nodes, edges, outputs=outputs, name=name or f"train-{forward.name}")


def residual_forward(blocks: int, seed: int = 0, stages: int = 3) -> ComputeGraph:
    """A ResNet-like forward DAG: per block ``a = f(x)``, ``b = g(a)``, ``x' = b + x``.

    Activations halve in size and layers get cheaper at each of ``stages`` downsampling points;
    sizes and costs are jittered by ``seed``.
    """
    rng = random.Random(seed)
    nodes = [Node("x", 64, 0.0, "input", True)]
    edges = []
    prev = "x"
    per_stage = max(1, blocks // stages)
    for k in range(blocks):
        size = max(1, 64 >> min(k // per_stage, 5))
        jitter = lambda: rng.uniform(0.8, 1.25)  # noqa: E731 - a local shorthand
        a, b, out = f"b{k}a", f"b{k}b", f"b{k}add"
        nodes += [Node(a, int(size * jitter()), round(size * jitter(), 1), "forward", module=f"block{k}"),
                  Node(b, int(size * jitter()), round(size * jitter(), 1), "forward", module=f"block{k}"),
                  Node(out, size, round(0.1 * size, 1), "forward", module=f"block{k}")]
        edges += [(prev, a), (a, b), (b, out), (prev, out)]
        prev = out
    return ComputeGraph(nodes, edges, name=f"resnet-{blocks}")


def benchmark_graphs() -> list[ComputeGraph]:
    """The generated training graphs of a few hundred nodes that the solver benchmarks run on."""
    return [training_graph(residual_forward(16, seed=1), name="resnet16-train"),
            training_graph(residual_forward(33, seed=2), name="resnet33-train"),
            training_graph(residual_forward(50, seed=3), name="resnet50-train"),
            training_graph(random_dag(100, edge_probability=0.03, max_mem=64, seed=4), name="random100-train")]


def main() -> None:
    print(f"{'graph':<18} {'nodes':>6} {'edges':>6} {'ckpt-all peak':>14} {'lower bound':>12}")
    for g in benchmark_graphs():
        print(f"{g.name:<18} {len(g):>6} {len(g.edges):>6} {checkpoint_all_peak(g):>14} {memory_lower_bound(g):>12}")


if __name__ == "__main__":
    main()
