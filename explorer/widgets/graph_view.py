"""The Graph page's view of the graph: levels of detail, a search, the schedule's colours, a step, a clicked node.

The whole panel is one fragment: opening a module, searching, stepping or clicking redraws only
the view (the decompositions below it stay). What the panel remembers lives in the session and
is dropped when the model changes: the open groups (start: :func:`remat_core.analysis.default_expansion`)
and the selected node or module. Clicking a module opens it; clicking a node selects it (for the
Why page too) and shows its facts with a link to its Why page.
"""

from __future__ import annotations

from functools import partial
from urllib.parse import parse_qsl

import streamlit as st

from remat_core import ComputeGraph
from remat_core.analysis import (MAX_DRAWN_NODES, GraphView, Hierarchy, collapse, default_expansion, expand,
                                 expanded_to_depth, find, hierarchy, reveal, selection_focus, view_node)
from remat_core.graph import format_bytes, node_labels
from remat_core.schedule import SimulationResult, describe_op, occurrences
from remat_core.viz import clicked_index, node_facts

from .. import safety, state
from ..figures.graph import graph_view_chart, laid_out_view
from ..jobs.results import options_key, awaited_solve
from ..jobs.waiting import rerun_when_solved
from ..pages import page_path
from ..state.links import page_link
from .text import plain

OPEN = "graph_view_open"
"""Session key: ``(content hash, frozenset of open group paths)``."""
SELECTED = "graph_view_selected"
"""Session key: ``(content hash, ("node", id) or ("group", path))``, or absent."""
CHART_GENERATION = "graph_view_chart_generation"
"""Bumped after a click is handled: the chart gets a new key, which clears plotly's selection."""
COLOUR_KEY, STEP_KEY, FIND_KEY, MATCH_KEY, DEPTH_KEY, OPEN_KEY = (
    "w_graph_colour", "w_graph_step", "w_graph_find", "w_graph_match", "w_graph_depth", "w_graph_open")
COLOURINGS = {"schedule": "Schedule", "step": "Step", "kind": "Kind"}
CHART_CONTAINER = "graph-view"
"""The chart sits in a container with this key (class ``st-key-graph-view`` in the page): a benchmark
waits for ``.st-key-graph-view .js-plotly-plot`` to time the first draw."""
LISTED_MATCHES = 50
"""The search lists at most this many matches, the closest first."""
SOLVE_WAIT_SECONDS = 0.3
"""The view waits this long for the schedule before drawing by kind and polling for it."""


def open_groups(graph: ComputeGraph) -> frozenset[str]:
    """The groups open in this session's view of ``graph`` (the default levels for a new model)."""
    saved = st.session_state.get(OPEN)
    if saved is None or saved[0] != graph.content_hash:
        saved = (graph.content_hash, default_expansion(graph))
        st.session_state[OPEN] = saved
        st.session_state.pop(SELECTED, None)
    return saved[1]


def _set_open(graph: ComputeGraph, groups: frozenset[str]) -> None:
    st.session_state[OPEN] = (graph.content_hash, frozenset(groups))


def selected_target(graph: ComputeGraph) -> tuple[str, str] | None:
    """``("node", id)`` or ``("group", path)`` selected in this session's view of ``graph``, if any."""
    saved = st.session_state.get(SELECTED)
    return saved[1] if saved and saved[0] == graph.content_hash else None


def go_to(graph: ComputeGraph, target: tuple[str, str]) -> None:
    """Select a node (opening the groups that hold it; the Why page's tensor too) or a module (opening its parents)."""
    kind, key = target
    if kind == "node":
        _set_open(graph, reveal(graph, open_groups(graph), key))
        st.session_state[state.WHY_TENSOR] = graph.node(key).id
    else:
        _set_open(graph, open_groups(graph) | set(hierarchy(graph).ancestors(key)))
    st.session_state[SELECTED] = (graph.content_hash, target)


def _target_name(graph: ComputeGraph, target: tuple[str, str]) -> str:
    kind, key = target
    return node_labels(graph)[key] if kind == "node" else f"{hierarchy(graph).groups[key].label} (module)"


@safety.callback
def _searched(graph: ComputeGraph) -> None:
    matches = find(graph, st.session_state.get(FIND_KEY, ""))
    if matches:
        go_to(graph, matches[0])


@safety.callback
def _match_picked(graph: ComputeGraph) -> None:
    if st.session_state.get(MATCH_KEY) is not None:
        go_to(graph, tuple(st.session_state[MATCH_KEY]))


@safety.callback
def _depth_picked(graph: ComputeGraph) -> None:
    _set_open(graph, expanded_to_depth(graph, int(st.session_state[DEPTH_KEY])))


@safety.callback
def _open_picked(graph: ComputeGraph) -> None:
    chosen = set(st.session_state[OPEN_KEY])
    groups = open_groups(graph)
    for path in groups - chosen:
        groups = collapse(graph, groups, path)
    for path in chosen - groups:
        groups = expand(graph, groups, path)
    _set_open(graph, groups)


@safety.callback
def _clicked(graph: ComputeGraph, chart_key: str, expanded: frozenset[str]) -> None:
    """Plotly selection callback: a module opens, a node is selected."""
    event = st.session_state.get(chart_key)
    points = event.selection.points if event is not None and event.selection else []
    picked = [k for k in (clicked_index(p) for p in points) if k is not None]
    if not picked:
        return
    view, _ = laid_out_view(graph.content_hash, graph, expanded)
    if not 0 <= picked[0] < len(view.nodes):
        return
    node = view.nodes[picked[0]]
    if node.group is not None:
        _set_open(graph, expand(graph, open_groups(graph), node.group))
        st.session_state[SELECTED] = (graph.content_hash, ("group", node.group))
    else:
        go_to(graph, ("node", node.id))
    st.session_state[CHART_GENERATION] = st.session_state.get(CHART_GENERATION, 0) + 1


def _uniform_depth(graph: ComputeGraph, groups: frozenset[str]) -> int:
    """The deepest level whose groups are all open."""
    tree = hierarchy(graph)
    return max(d for d in range(tree.depth + 1) if expanded_to_depth(graph, d) <= groups)


def _controls(graph: ComputeGraph, groups: frozenset[str]) -> str:
    """Search, level of detail and colouring; returns the colouring."""
    tree = hierarchy(graph)
    find_column, colour_column = st.columns([3, 2])
    with find_column:
        text = st.text_input("Find a node or module", key=FIND_KEY, placeholder="a name, e.g. layer3.1.conv2",
                             on_change=_searched, args=(graph,))
        every = find(graph, text, limit=None) if text else []
        matches = every[:LISTED_MATCHES]
        if text and not matches:
            st.caption(f"Nothing is named like “{plain(text)}”.")
        elif len(matches) > 1:
            listed = (f"{len(every):,} matches" if len(every) == len(matches) else
                      f"{len(every):,} matches, the closest {len(matches)} listed (scroll; type more to narrow)")
            st.selectbox(listed, matches, index=None, key=MATCH_KEY, format_func=lambda m: _target_name(graph, m),
                         placeholder="pick one", on_change=_match_picked, args=(graph,))
    with colour_column:
        colouring = st.segmented_control("Colour by", list(COLOURINGS), format_func=COLOURINGS.get,
                                         default="schedule", key=COLOUR_KEY, required=True)
    sizes = tree.view_sizes
    st.session_state[DEPTH_KEY] = _uniform_depth(graph, groups)
    st.select_slider("Detail", options=list(range(tree.depth + 1)), key=DEPTH_KEY, on_change=_depth_picked,
                     args=(graph,), format_func=lambda d: _depth_name(d, tree.depth, sizes[d]),
                     help="Open whole levels of modules at once; click a ◆ module in the graph to open just "
                          "that one.")
    return colouring


def _open_groups_title(tree: Hierarchy, groups: frozenset[str]) -> str:
    """The expander's title: how many modules are open, or runs of nodes for a graph that names no modules."""
    runs = sum(1 for g in groups if g in tree.runs)
    modules = len(groups) - runs
    if not tree.runs:
        return f"Open modules ({modules})"
    if len(tree.runs) == len(tree.groups):
        return f"Open runs of nodes ({runs}; this graph names no modules, so its ops are grouped in order)"
    return f"Open modules ({modules}) and runs of unnamed nodes ({runs})"


def _depth_name(depth: int, deepest: int, nodes: int) -> str:
    name = "modules" if depth == 0 else "every op" if depth == deepest else f"level {depth + 1}"
    return f"{name} · {nodes:,} nodes"


def _schedule(graph: ComputeGraph) -> tuple[SimulationResult | None, str]:
    """The current schedule's simulation (None, said on the page, while it is solved or when there is none)
    and what it is: the solver and the budget."""
    solver, budget = state.solver(), state.budget()
    options, limit = options_key(state.solve_options(solver)), state.time_limit()
    outcome = awaited_solve(graph, budget, solver, options, limit, wait=SOLVE_WAIT_SECONDS)
    what = f"{solver} at {format_bytes(budget)}"
    if outcome is None:
        st.caption(f"Solving {plain(what)}… coloured by kind until the schedule is ready.")
        rerun_when_solved(graph, solver, budget, options, limit)
        return None, what
    if outcome.schedule is None:
        reason = outcome.detail or "no schedule"
        st.caption(f"{plain(what)} has no schedule ({plain(reason)}); coloured by kind. Pick another budget or "
                   f"solver on the Schedule page.")
        return None, what
    return outcome.schedule.simulation, what


def _step_control(graph: ComputeGraph, simulation: SimulationResult) -> int:
    """The step slider (starting at the peak) and what happens at that step."""
    last = len(simulation.ops) - 1
    current = st.session_state.get(STEP_KEY)
    st.session_state[STEP_KEY] = max(simulation.peak_step, 0) if current is None else min(int(current), last)
    step = st.slider("Step", 0, last, key=STEP_KEY,
                     help="An op of the schedule: the view shows what is resident right after it (Home/End and the "
                          "arrow keys move it).")
    st.caption(f"**{plain(describe_op(graph, simulation, step, occurrences(simulation)[step]))}** · memory after it "
               f"**{format_bytes(simulation.memory[step])}** (peak {format_bytes(simulation.peak)} at step "
               f"{simulation.peak_step})")
    return step


def _why_link(graph: ComputeGraph, node_id: str, computes: int) -> None:
    """A link to the node's Why page in the URL state every page reads (model and level as the current URL has
    them, the budget in exact bytes)."""
    url = page_link("why", model=st.query_params.get("model"), level=st.query_params.get("level"),
                    solver=state.solver(), budget=f"{state.budget()}B", tensor=node_labels(graph)[node_id])
    question = f"Why is it computed {computes}×?" if computes > 1 else "Open it on the Why page"
    st.page_link(page_path("why"), label=question, icon=":material/help:",
                 query_params=dict(parse_qsl(url.partition("?")[2])))


def _details(graph: ComputeGraph, view: GraphView, target: tuple[str, str] | None,
             simulation: SimulationResult | None) -> None:
    """What is known about the selected node (or module)."""
    if target is None:
        st.caption("Click a ◆ module to open it, or a node for its details and its Why page.")
        return
    kind, key = target
    if kind == "group":
        group = hierarchy(graph).groups[key]
        st.markdown(f"**{plain(group.label)}** · module of {group.size:,} nodes (open: its parts are drawn)")
        return
    shown = view.nodes[int(view.member_of[graph.index[key]])]
    facts = node_facts(view_node(graph, key))
    with st.container(border=True):
        st.markdown(f"**{plain(facts[0])}**  \n" + "  \n".join(plain(line) for line in facts[1:]))
        if shown.id != key:
            st.caption(f"Inside {plain(shown.label)}, drawn closed.")
        node = graph.node(key)
        st.caption(f"Reads {len(graph.preds(key))} tensors, read by {len(graph.succs(key))}.")
        if simulation is not None and not node.pinned:
            computes = simulation.compute_counts.get(key, 0)
            st.markdown(f"Computed **{computes}×** by this schedule." if computes else
                        "Not computed by this schedule (no output needs it).")
            if computes:
                _why_link(graph, key, computes)


@safety.fragment
def graph_view_panel(graph: ComputeGraph, marked_ids: tuple[str, ...] = ()) -> None:
    """The graph view with its controls (see the module docstring); ``marked_ids`` are ringed (a bag's vertices)."""
    groups = open_groups(graph)
    colouring = _controls(graph, groups)
    tree = hierarchy(graph)
    with st.expander(_open_groups_title(tree, groups)):
        st.session_state[OPEN_KEY] = sorted(groups, key=lambda p: tree.groups[p].first)
        st.multiselect("Open modules", list(tree.groups), key=OPEN_KEY, label_visibility="collapsed",
                       format_func=lambda p: tree.groups[p].label, on_change=_open_picked, args=(graph,),
                       placeholder="every module is closed", help="Remove one to close it (and what is inside).")
    view, layout = laid_out_view(graph.content_hash, graph, groups)
    if len(view.nodes) > MAX_DRAWN_NODES:
        st.error(f"This view has {len(view.nodes):,} nodes, more than the {MAX_DRAWN_NODES:,} drawn at once; close "
                 f"some modules or pick less detail.", icon=":material/warning:")
        return
    simulation, what = _schedule(graph) if colouring != "kind" else (None, "")
    step = _step_control(graph, simulation) if colouring == "step" and simulation is not None else None
    target = selected_target(graph)
    selected, focus = selection_focus(graph, view, target)
    marked = frozenset(view.view_indices_of(graph, marked_ids))
    generation = st.session_state.get(CHART_GENERATION, 0)
    chart_key = f"graph_view_chart_{generation}"
    title = (what + (f" · after step {step}" if step is not None else "")) if simulation is not None else None
    figure = graph_view_chart(graph, view, layout, simulation, step, selected, focus, marked, title,
                              uirevision=f"{graph.content_hash}|{hash(groups)}|{target}")
    with st.container(key=CHART_CONTAINER):
        st.plotly_chart(figure, key=chart_key, on_select=partial(_clicked, graph, chart_key, groups),
                        selection_mode="points", config={"scrollZoom": True, "displaylogo": False})
    st.caption(f"{len(view.nodes):,} of {len(graph):,} nodes drawn · ◆ a module (click to open) · ■ always "
               f"resident (parameters, inputs) · ● an op · size by bytes · forward left to right, backward mirrored "
               f"below, parameters above · drag to pan, scroll to zoom, double-click to see it all.")
    _details(graph, view, target, simulation)
