"""Small synthetic graphs with known structure: for tests, benchmarks and teaching.

Like ``networkx.generators``: each function returns a fresh, valid :class:`ComputeGraph`.
"""

from __future__ import annotations

import random

from .graph import ComputeGraph, Node


def chain(n: int, mem: int = 1, cost: float = 1.0, name: str | None = None) -> ComputeGraph:
    """A forward-only chain ``x -> f1 -> ... -> fn`` (x pinned); the output is ``fn``."""
    _check_size(n)
    nodes = [Node("x", mem, 0.0, "input", True)]
    nodes += [Node(f"f{i}", mem, cost, "forward", label=f"layer {i}") for i in range(1, n + 1)]
    edges = [("x", "f1")] + [(f"f{i}", f"f{i + 1}") for i in range(1, n)]
    return ComputeGraph(nodes, edges, name=name or f"chain-{n}")


def training_chain(n: int, mem: int = 1, cost: float = 1.0, backward_cost_factor: float = 2.0,
                   name: str | None = None) -> ComputeGraph:
    """The training graph of an n-layer chain: forward ``f1..fn``, a loss, backward ``b_n..b_1``.

    ``b_i`` reads the upstream gradient (``b_{i+1}``, or the loss for ``i = n``) and the layer's
    input activation (``f_{i-1}``; the pinned input ``x`` for ``i = 1``). Every ``b_i`` is an
    output. Forward and backward interleave like the rungs of a ladder: the graph's pathwidth is
    a small constant however long the chain.
    """
    _check_size(n)
    nodes = [Node("x", mem, 0.0, "input", True)]
    nodes += [Node(f"f{i}", mem, cost, "forward", label=f"layer {i}") for i in range(1, n + 1)]
    nodes.append(Node("loss", mem, cost, "loss"))
    nodes += [Node(f"b{i}", mem, cost * backward_cost_factor, "backward", label=f"grad {i}")
              for i in range(n, 0, -1)]
    act = ["x"] + [f"f{i}" for i in range(1, n + 1)]
    edges = [(act[i - 1], act[i]) for i in range(1, n + 1)] + [(f"f{n}", "loss")]
    for i in range(n, 0, -1):
        edges.append(("loss" if i == n else f"b{i + 1}", f"b{i}"))
        edges.append((act[i - 1], f"b{i}"))
    return ComputeGraph(nodes, edges, outputs=[f"b{i}" for i in range(n, 0, -1)], name=name or f"training-chain-{n}")


def random_dag(n: int, edge_probability: float = 0.3, max_mem: int = 100, max_cost: float = 10.0,
               pinned_inputs: int = 1, seed: int = 0, name: str | None = None) -> ComputeGraph:
    """A random DAG on ``n`` computed nodes plus ``pinned_inputs`` pinned inputs.

    Node ``v{j}`` reads ``v{i}`` (i < j) with probability ``edge_probability``; a node left with
    no predecessor reads a random pinned input (or nothing if there is none). Memory and cost are
    uniform integers in ``[1, max_mem]`` and ``[0, max_cost]``.
    """
    _check_size(n)
    rng = random.Random(seed)
    nodes = [Node(f"in{k}", rng.randint(1, max_mem), 0.0, "input", True) for k in range(pinned_inputs)]
    nodes += [Node(f"v{j}", rng.randint(1, max_mem), float(rng.randint(0, int(max_cost))), "forward")
              for j in range(n)]
    edges = []
    for j in range(n):
        preds = [f"v{i}" for i in range(j) if rng.random() < edge_probability]
        if not preds and pinned_inputs:
            preds = [f"in{rng.randrange(pinned_inputs)}"]
        edges += [(p, f"v{j}") for p in preds]
    return ComputeGraph(nodes, edges, name=name or f"random-dag-{n}-s{seed}")


def _check_size(n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"a generated graph needs n >= 1 nodes, got {n!r}")
