"""Hypothesis strategies shared by the test modules: random valid compute graphs."""

from __future__ import annotations

from hypothesis import strategies as st

from remat_core.graph import ComputeGraph, Node


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
