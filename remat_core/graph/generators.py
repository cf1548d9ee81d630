"""Small synthetic graphs with known structure: for tests, benchmarks and teaching.

Like ``networkx.generators``: each function returns a fresh, valid :class:`ComputeGraph`.
"""

from __future__ import annotations

import heapq
import math
import random
from typing import Sequence

from .compute_graph import ComputeGraph, Node


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
    return layered_training_chain([mem] * n, [cost] * n, [cost * backward_cost_factor] * n, input_mem=mem,
                                  loss_mem=mem, loss_cost=cost, name=name or f"training-chain-{n}")


def layered_training_chain(mems: Sequence[int], costs: Sequence[float], backward_costs: Sequence[float] | None = None,
                           input_mem: int = 1, loss_mem: int = 1, loss_cost: float = 1.0,
                           name: str | None = None) -> ComputeGraph:
    """:func:`training_chain` with its own size and cost for every layer (a heterogeneous chain).

    Layer ``i`` (1-based) has activation ``f_i`` of ``mems[i-1]`` bytes and cost ``costs[i-1]``;
    its gradient ``b_i`` (with respect to the layer's input) has the size of that input
    (``input_mem`` for ``b_1``) and costs ``backward_costs[i-1]`` (default: twice the forward cost).
    """
    n = len(mems)
    _check_size(n)
    if len(costs) != n or (backward_costs is not None and len(backward_costs) != n):
        raise ValueError(f"layered_training_chain needs one cost (and backward cost) per layer: {n} sizes, "
                         f"{len(costs)} costs, {len(backward_costs) if backward_costs is not None else n} "
                         f"backward costs")
    backward_costs = [2.0 * c for c in costs] if backward_costs is None else backward_costs
    sizes = [input_mem, *mems]
    nodes = [Node("x", input_mem, 0.0, "input", True)]
    nodes += [Node(f"f{i}", mems[i - 1], costs[i - 1], "forward", label=f"layer {i}") for i in range(1, n + 1)]
    nodes.append(Node("loss", loss_mem, loss_cost, "loss"))
    nodes += [Node(f"b{i}", sizes[i - 1], backward_costs[i - 1], "backward", label=f"grad {i}")
              for i in range(n, 0, -1)]
    act = ["x"] + [f"f{i}" for i in range(1, n + 1)]
    edges = [(act[i - 1], act[i]) for i in range(1, n + 1)] + [(f"f{n}", "loss")]
    for i in range(n, 0, -1):
        edges.append(("loss" if i == n else f"b{i + 1}", f"b{i}"))
        edges.append((act[i - 1], f"b{i}"))
    return ComputeGraph(nodes, edges, outputs=[f"b{i}" for i in range(n, 0, -1)],
                        name=name or f"layered-training-chain-{n}")


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


def random_tree(n: int, mem: int = 1, cost: float = 1.0, seed: int = 0, name: str | None = None) -> ComputeGraph:
    """A random tree on ``n`` nodes, edges pointing away from the root ``t0``: treewidth 1 (n >= 2).

    Node ``t{j}`` (j >= 1) reads one earlier node chosen uniformly; the leaves are the outputs.
    """
    _check_size(n)
    rng = random.Random(seed)
    nodes = [Node(f"t{j}", mem, cost, "forward") for j in range(n)]
    edges = [(f"t{rng.randrange(j)}", f"t{j}") for j in range(1, n)]
    return ComputeGraph(nodes, edges, name=name or f"tree-{n}-s{seed}")


def cycle(n: int, mem: int = 1, cost: float = 1.0, name: str | None = None) -> ComputeGraph:
    """A cycle ``c0 - c1 - ... - c{n-1} - c0`` as a DAG (each edge from the lower to the higher index).

    Its skeleton is a cycle: treewidth and pathwidth 2 for n >= 3. The output is ``c{n-1}``.
    """
    _check_size(n)
    nodes = [Node(f"c{j}", mem, cost, "forward") for j in range(n)]
    edges = [(f"c{j}", f"c{j + 1}") for j in range(n - 1)]
    if n >= 3:
        edges.append(("c0", f"c{n - 1}"))
    return ComputeGraph(nodes, edges, name=name or f"cycle-{n}")


def grid(rows: int, cols: int, mem: int = 1, cost: float = 1.0, name: str | None = None) -> ComputeGraph:
    """A ``rows x cols`` grid, node ``g{i}_{j}`` reading its upper and left neighbours.

    Its skeleton is the grid graph: treewidth and pathwidth ``min(rows, cols)`` (when both are at
    least 2). The output is the bottom-right corner.
    """
    _check_size(rows)
    _check_size(cols)
    nodes = [Node(f"g{i}_{j}", mem, cost, "forward") for i in range(rows) for j in range(cols)]
    edges = [(f"g{i - 1}_{j}", f"g{i}_{j}") for i in range(1, rows) for j in range(cols)]
    edges += [(f"g{i}_{j - 1}", f"g{i}_{j}") for i in range(rows) for j in range(1, cols)]
    return ComputeGraph(nodes, edges, name=name or f"grid-{rows}x{cols}")


def k_tree(n: int, k: int, mem: int = 1, cost: float = 1.0, seed: int = 0, name: str | None = None) -> ComputeGraph:
    """A random k-tree on ``n >= k + 1`` nodes: treewidth exactly ``k``.

    Start from a clique on ``k + 1`` nodes; every further node is joined to all nodes of a k-clique
    chosen uniformly among those built so far. Edges point from the older node to the newer one.
    """
    _check_size(n)
    if not isinstance(k, int) or k < 1 or n < k + 1:
        raise ValueError(f"a k-tree needs k >= 1 and n >= k + 1 nodes, got n={n!r}, k={k!r}")
    rng = random.Random(seed)
    nodes = [Node(f"k{j}", mem, cost, "forward") for j in range(n)]
    edges = [(f"k{a}", f"k{b}") for b in range(k + 1) for a in range(b)]
    base = tuple(range(k + 1))
    cliques = [base[:i] + base[i + 1:] for i in range(k + 1)]
    for v in range(k + 1, n):
        chosen = cliques[rng.randrange(len(cliques))]
        edges += [(f"k{a}", f"k{v}") for a in chosen]
        cliques += [chosen[:i] + chosen[i + 1:] + (v,) for i in range(k)]
    return ComputeGraph(nodes, edges, name=name or f"{k}-tree-{n}-s{seed}")


def series_parallel(n: int, mem: int = 1, cost: float = 1.0, seed: int = 0, name: str | None = None) -> ComputeGraph:
    """A random two-terminal series-parallel DAG on ``n >= 2`` nodes: treewidth at most 2.

    Start from ``s -> t``; each new node ``w`` either subdivides a random edge ``u -> v`` (series:
    ``u -> w -> v``) or adds a path ``u -> w -> v`` beside it (parallel). The output is ``t``.
    """
    _check_size(n)
    if n < 2:
        raise ValueError(f"a series-parallel graph needs n >= 2 nodes (a source and a sink), got {n!r}")
    rng = random.Random(seed)
    edges = [("s", "t")]
    names = ["s", "t"]
    for j in range(n - 2):
        w = f"sp{j}"
        names.append(w)
        at = rng.randrange(len(edges))
        u, v = edges[at]
        if rng.random() < 0.5:
            edges[at] = (u, w)
        else:
            edges.append((u, w))
        edges.append((w, v))
    nodes = [Node(x, mem, cost, "forward") for x in names]
    return ComputeGraph(nodes, edges, outputs=["t"], name=name or f"series-parallel-{n}-s{seed}")


MOCCASIN_MEMORY_RANGE = (10, 6200)
"""Output sizes of :func:`random_layered` nodes (bytes, in steps of 10): the range of Moccasin's published graphs."""
MOCCASIN_DURATION_RANGE = (1, 1000)
"""Durations (costs) of :func:`random_layered`'s inner nodes: the range of Moccasin's published graphs."""
LAYER_ORDERS = ("depth-first", "layers")


def random_layered(n: int, width: float | None = None, layer_variance: float = 0.75, edge_density: float = 0.2,
                   skip_density: float = 0.14, seed: int = 0, order: str = "depth-first",
                   name: str | None = None) -> ComputeGraph:
    """A random layered compute DAG as Moccasin benchmarks on (Gagrani et al. 2022, appendix A).

    One source, one sink and ``n - 2`` nodes in between, laid out in layers; edges join
    neighbouring layers, and skip connections join layers two or more apart. It is a plain compute
    DAG (no backward pass): many parallel branches, so wide that which tensors a topological order
    keeps alive matters as much as what is recomputed.

    Parameters
    ----------
    n : int
        Number of nodes (at least 3: a source, a sink and one node between).
    width : float, optional
        ``W`` in (0, 1): ``L = ceil(sqrt(n (1/W - 1)))`` layers, so a larger ``W`` makes fewer,
        wider layers. Default: drawn uniformly from [0.25, 0.5] with the seed, as the published
        graphs were (their names carry it: ``w0.27``).
    layer_variance : float
        ``sigma`` in [0, 1): layer sizes are uniform integers in ``[m (1 - sigma), m (1 + sigma)]``,
        ``m = n / L`` (``nlv``; the published graphs use 0.75).
    edge_density : float
        In [0, 1]: between neighbouring layers of sizes ``a`` and ``b``,
        ``int(a b ed + (1 - ed) max(a, b))`` edges, spread evenly over the wider layer's nodes, each
        joined to a run of nodes around its proportional position in the narrower layer (``ed``:
        0.2). Every node gets an input and a reader this way.
    skip_density : float
        In [0, 1): ``ceil(E scd / (1 - scd))`` skip edges for ``E`` layer edges, each from a random
        layer to one at least two further on (never the sink's), from a random position ``x`` to
        one within ``x + 0.2`` of the target layer's width (``scd``: 0.14).
    seed : int
    order : {"depth-first", "layers"}
        The topological order the nodes are numbered in (ids ``"0"`` to ``"n-1"``), which is the
        order checkpoint-all runs in, so it sets the checkpoint-all peak that percent budgets
        refer to. ``depth-first`` computes the deepest node whose inputs are ready first, as the
        published graphs' ``order`` does (one branch finished before the next begins);
        ``layers`` computes layer after layer.

    Returns
    -------
    ComputeGraph
        Node labels ``layer L · k`` (k-th node of layer L). Sizes are multiples of 10 bytes in
        :data:`MOCCASIN_MEMORY_RANGE`, costs integers in :data:`MOCCASIN_DURATION_RANGE` (0 for
        the source and the sink); the sink is the output. Nothing is pinned.

    References
    ----------
    M. Gagrani, C. Rainone, Y. Yang, H. Teague, W. Jeon, R. Bondesan, H. van Hoof, C. Lott, W. Zeng,
    P. Zappi. "Neural Topological Ordering for Computation Graphs". NeurIPS 2022, appendix A.
    B. Bartan, H. Li, H. Teague, C. Lott, B. Dilkina. "Moccasin: Efficient Tensor Rematerialization
    for Neural Networks". ICML 2023 (the random_layered_n* graphs).
    """
    _check_size(n)
    if n < 3:
        raise ValueError(f"a random layered graph needs n >= 3 nodes (a source, a sink and one between), got {n!r}")
    _check_fraction("layer_variance", layer_variance, upper_open=True)
    _check_fraction("edge_density", edge_density)
    _check_fraction("skip_density", skip_density, upper_open=True)
    if order not in LAYER_ORDERS:
        raise ValueError(f"order must be one of {', '.join(LAYER_ORDERS)}, got {order!r}")
    rng = random.Random(seed)
    if width is None:
        width = round(rng.uniform(0.25, 0.5), 2)
    elif not isinstance(width, (int, float)) or not 0 < width < 1:
        raise ValueError(f"width must be a number in (0, 1) (a larger width gives fewer, wider layers), got {width!r}")
    layers = _layer_sizes(n, width, layer_variance, rng)
    first = [sum(layers[:k]) for k in range(len(layers))]  # index of each layer's first node
    edges: set[tuple[int, int]] = set()
    for k in range(len(layers) - 1):
        edges |= _neighbour_edges(first[k], layers[k], first[k + 1], layers[k + 1], edge_density, rng)
    edges |= _skip_edges(layers, first, math.ceil(len(edges) * skip_density / (1 - skip_density)), rng)
    layer_of = [k for k, size in enumerate(layers) for _ in range(size)]
    low, high = MOCCASIN_MEMORY_RANGE
    mems = [10 * rng.randint(low // 10, high // 10) for _ in range(n)]
    costs = [0.0 if v in (0, n - 1) else float(rng.randint(*MOCCASIN_DURATION_RANGE)) for v in range(n)]
    sequence = _depth_first_order(n, edges, layer_of) if order == "depth-first" else list(range(n))
    new_id = {v: str(position) for position, v in enumerate(sequence)}
    nodes = [Node(new_id[v], mems[v], costs[v], "forward", label=f"layer {layer_of[v]} · {v - first[layer_of[v]]}")
             for v in sequence]
    return ComputeGraph(nodes, sorted((new_id[u], new_id[v]) for u, v in edges), outputs=[new_id[n - 1]],
                        name=name or f"random_layered_n{n}_w{width:g}_nlv{layer_variance:g}_ed{edge_density:g}"
                                     f"_scd{skip_density:g}_s{seed}")


def _layer_sizes(n: int, width: float, variance: float, rng: random.Random) -> list[int]:
    """One source, random layer sizes around ``n / L`` until ``n - 2`` nodes are placed, one sink."""
    count = math.ceil(math.sqrt(n * (1 / width - 1)))
    mean = n / count
    low, high = max(1, math.ceil(mean * (1 - variance))), max(1, math.floor(mean * (1 + variance)))
    sizes, placed = [1], 0
    while placed < n - 2:
        size = min(rng.randint(low, max(low, high)), n - 2 - placed)
        sizes.append(size)
        placed += size
    return sizes + [1]


def _neighbour_edges(lower: int, lower_size: int, upper: int, upper_size: int, density: float,
                     rng: random.Random) -> set[tuple[int, int]]:
    """Edges from one layer to the next: each node of the wider layer reads (or feeds) a run of the
    narrower layer's nodes around its proportional position; run lengths spread the edge count evenly."""
    wide, wide_size, narrow, narrow_size = ((lower, lower_size, upper, upper_size) if lower_size >= upper_size
                                            else (upper, upper_size, lower, lower_size))
    total = int(lower_size * upper_size * density + (1 - density) * wide_size)
    runs = [total // wide_size] * wide_size
    for i in rng.sample(range(wide_size), total % wide_size):
        runs[i] += 1
    edges = set()
    for i, run in enumerate(runs):
        centre = 0 if wide_size == 1 else math.ceil(i * (narrow_size - 1) / (wide_size - 1))
        start = centre - (run - 1) // 2
        for j in range(max(start, 0), min(start + run, narrow_size)):
            a, b = wide + i, narrow + j
            edges.add((a, b) if wide == lower else (b, a))
    return edges


def _skip_edges(layers: list[int], first: list[int], count: int, rng: random.Random) -> set[tuple[int, int]]:
    """``count`` edges skipping at least one layer, never into the sink's layer (none when too few layers)."""
    inner = len(layers) - 1  # the sink's layer takes no skip edges
    edges: set[tuple[int, int]] = set()
    if inner < 3:
        return edges
    for _ in range(count):
        source_layer = rng.randint(0, inner - 3)
        target_layer = rng.randint(source_layer + 2, inner - 1)
        x = rng.random()
        to = min(x + 0.2 * rng.random(), 0.999)
        edges.add((first[source_layer] + math.floor(x * layers[source_layer]),
                   first[target_layer] + math.floor(to * layers[target_layer])))
    return edges


def _depth_first_order(n: int, edges: set[tuple[int, int]], layer_of: list[int]) -> list[int]:
    """A topological order that always computes the deepest ready node (the earliest on ties)."""
    preds_left = [0] * n
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        preds_left[v] += 1
        succs[u].append(v)
    ready = [(-layer_of[v], v) for v in range(n) if preds_left[v] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, v = heapq.heappop(ready)
        order.append(v)
        for w in succs[v]:
            preds_left[w] -= 1
            if preds_left[w] == 0:
                heapq.heappush(ready, (-layer_of[w], w))
    return order


def _check_fraction(what: str, value: float, upper_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0 <= value < 1 if upper_open else 0 <= value <= 1):
        raise ValueError(f"{what} must be a number in [0, 1{')' if upper_open else ']'}, got {value!r}")


def _check_size(n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"a generated graph needs n >= 1 nodes, got {n!r}")
