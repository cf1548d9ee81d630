"""The decompositions the treewidth and pathwidth solvers recurse on, and their figures, cached by the
graph's content hash."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from remat_core import ComputeGraph
from remat_core.analysis import topological_positions
from remat_core.decompose import path_decomposition, separator_tree, tree_decomposition
from remat_core.graph import node_labels
from remat_core.viz import path_strip_figure, separator_tree_figure, tree_of_bags_figure

FIGURES = ("tree", "path", "separators")
"""The figures of the decompositions: the tree of bags, the path strip, the separator tree (of the tree)."""


@st.cache_data(max_entries=24, show_spinner="Decomposing the graph…")
def decomposition(graph_key: str, _graph: ComputeGraph, kind: str, method: str):
    """A tree (``kind="tree"``) or path decomposition of the graph and its separator tree.

    Raises
    ------
    DecompositionError
        For a method that refuses the graph (the exact method above its size limit).
    """
    del graph_key
    built = tree_decomposition(_graph, method) if kind == "tree" else path_decomposition(_graph, method)
    return built, separator_tree(built)


@st.cache_data(max_entries=12, show_spinner=False)
def decomposition_figure(graph_key: str, _graph: ComputeGraph, figure: str, method: str, selected: int | None,
                         height: int) -> go.Figure:
    """One of :data:`FIGURES` for the decomposition built by ``method``, bags named by their members'
    labels, ``selected`` (a bag index) outlined (the separator tree is drawn from it down). Cached: at
    10,000 bags a figure takes seconds to build."""
    built, separators = decomposition(graph_key, _graph, "path" if figure == "path" else "tree", method)
    labels = node_labels(_graph)
    if figure == "tree":
        return tree_of_bags_figure(built.bags, built.edges, labels=labels, selected=selected, horizontal=True)
    if figure == "path":
        position = topological_positions(_graph)
        order = {node_id: int(position[i]) for i, node_id in enumerate(_graph.ids)}
        return path_strip_figure(built.bags, labels=labels, order=order, selected=selected, height=height + 80)
    return separator_tree_figure(built.bags, separators.parent, labels=labels, selected=selected, top=selected,
                                 height=height)
