"""Pictures of the graph: the DAG of one view (every node, modules, a neighbourhood), as pyvis HTML cached
by the graph's content hash."""

from __future__ import annotations

import streamlit as st

from remat_core import ComputeGraph
from remat_core.analysis import full_view, module_view, neighbourhood_view
from remat_core.viz import dag_html


@st.cache_data(max_entries=24, show_spinner=False)
def dag_page(graph_key: str, _graph: ComputeGraph, level: str, depth: int, centre: str | None, hops: int,
             highlight: tuple[str, ...], focus: str | None) -> tuple[str, int]:
    """The DAG's HTML for one view (``op``, ``module`` or ``neighbourhood``) and how many nodes it draws."""
    del graph_key
    if level == "module":
        view = module_view(_graph, depth)
    elif level == "neighbourhood":
        view = neighbourhood_view(_graph, centre, hops)
    else:
        view = full_view(_graph)
    marked = view.view_ids_of(highlight)
    target = view.member_of.get(focus) if focus else None
    return dag_html(view, highlight=marked, focus=target), len(view.nodes)
