"""The decompositions the treewidth and pathwidth solvers recurse on, cached by the graph's content hash."""

from __future__ import annotations

import streamlit as st

from remat_core import ComputeGraph
from remat_core.decompose import path_decomposition, separator_tree, tree_decomposition


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
