"""The decompositions the treewidth and pathwidth solvers recurse on, on the Graph page.

Decompositions and their figures are cached by the graph's content hash; a big graph's are built
when asked for (they take seconds at 10,000 nodes, and the graph view above should not wait for
them). Bags are named by their members (:func:`remat_core.graph.node_labels`), the separator tree
opens a few levels at a time, the path decomposition is a strip over the graph's order, and the
widest bag is marked. A bag picked in a figure (or in the bag selector) is kept in the session, so
the graph view drawn above the figures can ring its vertices.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import streamlit as st

from remat_core import ComputeGraph, RematError
from remat_core.decompose import PATH_METHODS, TREE_HEURISTICS
from remat_core.graph import node_labels
from remat_core.viz import bag_label, clicked_index

from .. import safety
from ..figures.decompositions import decomposition, decomposition_figure
from .exports import decomposition_download
from .rows import figure_metric, wrapping_row
from .text import plain

SELECTED_BAG = "graph_selected_bag"
"""Session key: ``(kind, bag index)`` of the bag to highlight, or None."""
ASKED = "graph_decompositions_asked"
"""Session key: the content hash of the big graph whose decompositions were asked for."""
METHOD_KEYS = {"tree": "w_graph_tree_method", "path": "w_graph_path_method"}
DEFAULT_METHODS = {"tree": "min_degree", "path": "vertex_separation"}
DECOMPOSE_AT_ONCE_UP_TO = 3000
"""Graphs with more nodes are decomposed when asked (a button), not on opening the page."""
PICKABLE_BAGS = 20
"""The bag selector offers the widest bags of each decomposition (any bag is picked by a click)."""


def chosen_methods() -> dict[str, str]:
    """The tree and path decomposition methods picked on the Graph page (the defaults until then)."""
    return {kind: st.session_state.get(key, DEFAULT_METHODS[kind]) for kind, key in METHOD_KEYS.items()}


def method_pickers() -> dict[str, str]:
    """The two method selectors; returns the methods picked."""
    left, right = st.columns(2)
    left.selectbox("Tree decomposition", TREE_HEURISTICS, key=METHOD_KEYS["tree"],
                   index=TREE_HEURISTICS.index(DEFAULT_METHODS["tree"]),
                   help="min_degree and min_fill are networkx heuristics; exact searches for the optimum on "
                        "small graphs.")
    right.selectbox("Path decomposition", PATH_METHODS, key=METHOD_KEYS["path"],
                    index=PATH_METHODS.index(DEFAULT_METHODS["path"]),
                    help="vertex_separation: a width-minimising vertex ordering; from_tree: read off the tree "
                         "decomposition; best: the narrower of both.")
    return chosen_methods()


def _built(graph: ComputeGraph, methods: dict[str, str], kind: str):
    """The decomposition of ``kind`` if it may be shown now (a small graph, or a big one asked for), else None."""
    if len(graph) > DECOMPOSE_AT_ONCE_UP_TO and st.session_state.get(ASKED) != graph.content_hash:
        return None
    try:
        return decomposition(graph.content_hash, graph, kind, methods[kind])
    except RematError:
        return None


def selected_bag_vertices(graph: ComputeGraph, methods: dict[str, str]) -> tuple[str, ...]:
    """The node ids of the bag picked on this page (empty when none is, or it no longer exists)."""
    picked = st.session_state.get(SELECTED_BAG)
    built = _built(graph, methods, picked[0]) if picked else None
    if built is None:
        return ()
    bags = built[0].bags
    return tuple(bags[picked[1]]) if 0 <= picked[1] < len(bags) else ()


@safety.callback
def _picked(chart_key: str, kind: str) -> None:
    """Plotly selection callback: keep the first selected bag of that figure."""
    event = st.session_state.get(chart_key)
    points = event.selection.points if event is not None and event.selection else []
    bags = [b for b in (clicked_index(p) for p in points) if b is not None]
    st.session_state[SELECTED_BAG] = (kind, bags[0]) if bags else None


@safety.callback
def _bag_picked(picker_key: str) -> None:
    choice = st.session_state[picker_key]
    st.session_state[SELECTED_BAG] = None if choice is None else tuple(choice)


def bag_picker(built: dict[str, Any], labels, key: str) -> None:
    """A selector for the bag to highlight: the widest bags of each decomposition (the figures' clicks pick any)."""
    picked = st.session_state.get(SELECTED_BAG)
    options = [(kind, i) for kind in built
               for i in sorted(range(len(built[kind][0].bags)), key=lambda i: -len(built[kind][0].bags[i]))
               [:PICKABLE_BAGS]]
    if picked and tuple(picked) not in options and picked[0] in built \
            and 0 <= picked[1] < len(built[picked[0]][0].bags):
        options.insert(0, tuple(picked))
    picker_key = f"w_{key}_bag"
    st.session_state[picker_key] = tuple(picked) if picked and tuple(picked) in options else None

    def name(option: tuple[str, int]) -> str:
        bag = built[option[0]][0].bags[option[1]]
        return f"{option[0]} bag {option[1]} · {len(bag)} vertices · {bag_label(bag, labels, 60)}"
    st.selectbox("Highlight a bag (the widest are listed; click any bag in a figure)", options, key=picker_key,
                 index=None, placeholder="click a bag, or pick one", format_func=name, on_change=_bag_picked,
                 args=(picker_key,))


def decomposition_figures(graph: ComputeGraph, methods: dict[str, str], key: str, height: int = 380) -> None:
    """Width and time of both decompositions, and one figure at a time: the separator tree, the path strip or
    the tree of bags.

    Clicking a bag (or picking one below the figures) rings its vertices in the figures and in the graph view.
    """
    if len(graph) > DECOMPOSE_AT_ONCE_UP_TO and st.session_state.get(ASKED) != graph.content_hash:
        st.info(f"{len(graph):,} nodes: decomposing takes seconds, so it waits until you ask.",
                icon=":material/schedule:")
        if st.button("Decompose this graph", key=f"{key}_decompose", icon=":material/account_tree:"):
            st.session_state[ASKED] = graph.content_hash
            st.rerun()
        return
    picked = st.session_state.get(SELECTED_BAG)
    built: dict[str, Any] = {}
    for kind in ("tree", "path"):
        try:
            built[kind] = decomposition(graph.content_hash, graph, kind, methods[kind])
        except RematError as e:
            st.error(f"The {kind} decomposition ({methods[kind]}) is not available for this graph: {plain(e)}")
    if not built:
        return
    figures = wrapping_row()
    for kind, (decomposition_, separators) in built.items():
        figure_metric(figures, f"{kind.capitalize()} width", decomposition_.width,
               f"{len(decomposition_.bags):,} bags, {decomposition_.method}")
        took = decomposition_.seconds
        figure_metric(figures, f"{kind.capitalize()} time", f"{took:.1f} s" if took >= 1 else f"{took * 1e3:,.0f} ms",
               f"separator tree height {separators.height}")
    bag_picker(built, node_labels(graph), key)
    downloads = st.columns(len(built))
    for column, (kind, (decomposition_, separators)) in zip(downloads, built.items()):
        with column:
            decomposition_download(decomposition_, separators, key=f"{key}_{kind}_download")
    shown = {title: (figure, kind) for title, figure, kind in (("Separator tree", "separators", "tree"),
                                                               ("Path strip", "path", "path"),
                                                               ("Tree of bags", "tree", "tree"))
             if kind in built}
    # one figure at a time (not tabs): the browser draws only the one looked at
    title = st.segmented_control("Show", list(shown), default=next(iter(shown)), key=f"w_{key}_decomposition_figure",
                                 required=True, label_visibility="collapsed")
    figure, kind = shown[title]
    selected = picked[1] if picked and picked[0] == kind else None
    chart = decomposition_figure(graph.content_hash, graph, figure, methods[kind], selected, height)
    if figure == "separators":  # a click opens the tree below the bag: no selection
        st.plotly_chart(chart, key=f"{key}_{figure}")
    else:
        st.plotly_chart(chart, key=f"{key}_{figure}", on_select=partial(_picked, f"{key}_{figure}", kind),
                        selection_mode="points")
    st.caption(CAPTIONS[figure].format(height=built[kind][1].height))


CAPTIONS = {
    "tree": "Each marker is a bag, larger for more vertices, some named by their members (hover any for all of them); "
            "the widest is red and named at the top. Every edge of the graph lies in some bag, and the bags holding a "
            "tensor form a connected subtree. Click a bag to ring its vertices in the graph above.",
    "path": "The strip on top: the bags left to right, as tall as they are (the widest red; hover a bag for its "
            "members). Below: each tensor at its place in the graph's order, with a line over the bags that hold it, "
            "so the bags sweep through the graph (forward down, backward back up). Click a bag in the strip to ring "
            "its vertices in the graph above.",
    "separators": "The treewidth solver's recursion: the root bag separates the graph into the parts below it, each "
                  "split again by its own separator bag; a box is as wide as the vertices under it. Click a bag to "
                  "open the tree under it, the bar above to go back up (height {height}). Big trees show their top "
                  "levels; pick a bag (above, or in another figure) to see the tree below it.",
}
"""What each figure shows, under it."""
