"""The decompositions the treewidth and pathwidth solvers recurse on, for the Graph and Learn pages.

Decompositions are cached by the graph's content hash; a bag picked in a figure (or in the bag
selector) is kept in the session, so the DAG drawn above the figures can highlight its vertices.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import streamlit as st

from remat_core import ComputeGraph, RematError
from remat_core.viz import path_strip_figure, tree_of_bags_figure

from ..figures.decompositions import decomposition
from .exports import decomposition_download
from .text import plain

SELECTED_BAG = "graph_selected_bag"
"""Session key: ``(kind, bag index)`` of the bag to highlight, or None."""


def selected_bag_vertices(graph: ComputeGraph, methods: dict[str, str]) -> tuple[str, ...]:
    """The node ids of the bag picked on this page (empty when none is, or it no longer exists)."""
    picked = st.session_state.get(SELECTED_BAG)
    if not picked:
        return ()
    kind, index = picked
    try:
        built, _ = decomposition(graph.content_hash, graph, kind, methods[kind])
    except RematError:
        return ()
    return tuple(built.bags[index]) if 0 <= index < len(built.bags) else ()


def _point_bag(point: Any) -> int | None:
    data = point.get("customdata")
    if isinstance(data, (list, tuple)):
        data = data[0] if data else None
    if data is None and point.get("x") is not None:
        data = round(float(point["x"]))
    return int(data) if data is not None else None


def _picked(chart_key: str, kind: str) -> None:
    """Plotly selection callback: keep the first selected bag of that figure."""
    event = st.session_state.get(chart_key)
    points = event.selection.points if event is not None and event.selection else []
    bags = [b for b in (_point_bag(p) for p in points) if b is not None]
    st.session_state[SELECTED_BAG] = (kind, bags[0]) if bags else None


def _bag_picked(picker_key: str) -> None:
    choice = st.session_state[picker_key]
    st.session_state[SELECTED_BAG] = None if choice is None else tuple(choice)


def bag_picker(built: dict[str, Any], key: str) -> None:
    """A selector for the bag to highlight (the figures' clicks set it too)."""
    options = [(kind, i) for kind in built for i in range(len(built[kind][0].bags))]
    picker_key = f"w_{key}_bag"
    picked = st.session_state.get(SELECTED_BAG)
    st.session_state[picker_key] = tuple(picked) if picked and tuple(picked) in options else None
    st.selectbox("Highlight a bag", options, key=picker_key, index=None, placeholder="click a bag, or pick one",
                 format_func=lambda o: f"{o[0]} bag {o[1]} ({len(built[o[0]][0].bags[o[1]])} vertices)",
                 on_change=_bag_picked, args=(picker_key,))


def decomposition_figures(graph: ComputeGraph, methods: dict[str, str], key: str, height: int = 380) -> None:
    """Width and time of both decompositions, the tree of bags, the path strip and the separator tree.

    Clicking a bag (or picking one below the figures) highlights it in the figures and in the DAG.
    """
    labels = {n.id: n.display_name for n in graph.nodes}
    picked = st.session_state.get(SELECTED_BAG)
    built: dict[str, Any] = {}
    for kind in ("tree", "path"):
        try:
            built[kind] = decomposition(graph.content_hash, graph, kind, methods[kind])
        except RematError as e:
            st.error(f"The {kind} decomposition ({methods[kind]}) is not available for this graph: {plain(e)}")
    if not built:
        return
    cols = st.columns(4)
    for column, kind in zip((cols[0], cols[2]), built):
        decomposition_, separators = built[kind]
        column.metric(f"{kind.capitalize()} width", decomposition_.width,
                      delta=f"{len(decomposition_.bags):,} bags, {decomposition_.method}", delta_color="off",
                      delta_arrow="off")
        cols[1 if kind == "tree" else 3].metric(f"{kind.capitalize()} time", f"{decomposition_.seconds * 1e3:,.0f} ms",
                                                delta=f"separator tree height {separators.height}",
                                                delta_color="off", delta_arrow="off")
    bag_picker(built, key)
    downloads = st.columns(len(built))
    for column, (kind, (decomposition_, separators)) in zip(downloads, built.items()):
        with column:
            decomposition_download(decomposition_, separators, key=f"{key}_{kind}_download")
    tabs = st.tabs([name for name, kind in (("Tree of bags", "tree"), ("Path strip", "path"),
                                            ("Separator tree", "tree")) if kind in built])
    tab = iter(tabs)
    if "tree" in built:
        tree, separators = built["tree"]
        selected = picked[1] if picked and picked[0] == "tree" else None
        with next(tab):
            st.plotly_chart(tree_of_bags_figure(tree.bags, tree.edges, labels=labels, selected=selected,
                                                horizontal=True), key=f"{key}_tree",
                            on_select=partial(_picked, f"{key}_tree", "tree"), selection_mode="points")
            st.caption("Each marker is a bag, larger for more vertices (hover to list them); the widest bags are red. "
                       "Every edge of the graph lies in some bag, and the bags holding a tensor form a connected "
                       "subtree. Click a bag to highlight its vertices in the DAG above.")
    if "path" in built:
        path, _ = built["path"]
        selected = picked[1] if picked and picked[0] == "path" else None
        with next(tab):
            st.plotly_chart(path_strip_figure(path.bags, labels=labels, selected=selected, height=height),
                            key=f"{key}_path",
                            on_select=partial(_picked, f"{key}_path", "path"), selection_mode="points")
            st.caption("Bags left to right; one row per tensor, a bar over the bags that hold it; the red line is "
                       "the bag size. Click a bag on the red line.")
    if "tree" in built:
        tree, separators = built["tree"]
        edges = [(parent, child) for child, parent in enumerate(separators.parent) if parent >= 0]
        selected = picked[1] if picked and picked[0] == "tree" else None
        with next(tab):
            st.plotly_chart(tree_of_bags_figure(tree.bags, edges, root=separators.root, labels=labels,
                                                selected=selected, height=height), key=f"{key}_separators",
                            on_select=partial(_picked, f"{key}_separators", "tree"), selection_mode="points")
            st.caption("The treewidth solver's recursion: the root bag separates the graph into the parts below "
                       "it, each split again by its own centroid bag.")
