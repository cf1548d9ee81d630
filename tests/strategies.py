"""Hypothesis strategies shared by the test modules: random valid compute graphs."""

from __future__ import annotations

from hypothesis import strategies as st

from remat_core.graph.compute_graph import ComputeGraph, Node


@st.composite
def compute_graphs(draw, min_nodes: int = 1, max_nodes: int = 14, max_pinned: int = 2,
                   zero_mem: bool = True) -> ComputeGraph:
    """A random DAG: up to ``max_pinned`` pinned inputs, then computed nodes reading earlier ones.

    Memory may be zero (when ``zero_mem``), costs are small integers; outputs are left to the
    default (every non-pinned sink) or drawn as a random non-empty subset.
    """
    n = draw(st.integers(min_nodes, max_nodes))
    n_pinned = draw(st.integers(0, max_pinned))
    low = 0 if zero_mem else 1
    nodes = [Node(f"p{k}", draw(st.integers(low, 50)), 0.0, "param", True) for k in range(n_pinned)]
    edges = []
    for j in range(n):
        nodes.append(Node(f"n{j}", draw(st.integers(low, 50)), float(draw(st.integers(0, 9))),
                          draw(st.sampled_from(["forward", "backward", "other"]))))
        earlier = [f"p{k}" for k in range(n_pinned)] + [f"n{i}" for i in range(j)]
        if earlier:
            chosen = draw(st.lists(st.sampled_from(earlier), max_size=min(3, len(earlier)), unique=True))
            edges += [(u, f"n{j}") for u in chosen]
    computed = [f"n{j}" for j in range(n)]
    if draw(st.booleans()):
        outputs = None
    else:
        outputs = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=min(4, n), unique=True))
    return ComputeGraph(nodes, edges, outputs, name="hypothesis")


@st.composite
def structured_graphs(draw, max_nodes: int = 24) -> ComputeGraph:
    """A graph of known structure (k-tree, series-parallel, tree, cycle, grid, training chain) with
    random memory and cost per node: the families the decomposition-based solvers are built for."""
    from remat_core.graph import generators

    family = draw(st.sampled_from(["k_tree", "series_parallel", "random_tree", "cycle", "grid", "training_chain"]))
    seed = draw(st.integers(0, 10_000))
    if family == "k_tree":
        k = draw(st.integers(1, 4))
        shape = generators.k_tree(draw(st.integers(k + 1, max_nodes)), k, seed=seed)
    elif family == "series_parallel":
        shape = generators.series_parallel(draw(st.integers(2, max_nodes)), seed=seed)
    elif family == "random_tree":
        shape = generators.random_tree(draw(st.integers(1, max_nodes)), seed=seed)
    elif family == "cycle":
        shape = generators.cycle(draw(st.integers(1, max_nodes)))
    elif family == "grid":
        rows = draw(st.integers(1, 4))
        shape = generators.grid(rows, draw(st.integers(1, max(1, max_nodes // rows))))
    else:
        shape = generators.training_chain(draw(st.integers(1, max(1, (max_nodes - 2) // 2))))
    nodes = [Node(n.id, draw(st.integers(1, 30)), 0.0 if n.pinned else float(draw(st.integers(1, 9))), n.kind,
                  n.pinned) for n in shape.nodes]
    return ComputeGraph(nodes, shape.edges, shape.outputs, name=shape.name)


@st.composite
def training_graphs(draw, max_forward: int = 10) -> ComputeGraph:
    """The training graph (:func:`remat_core.with_backward`) of a random forward DAG whose pinned input trains."""
    from remat_core import with_backward
    from remat_core.graph.generators import random_dag

    forward = random_dag(draw(st.integers(1, max_forward)), draw(st.floats(0.05, 0.5)), max_mem=40, max_cost=9,
                         seed=draw(st.integers(0, 10_000)))
    return with_backward(forward, trainable=["in0"])
