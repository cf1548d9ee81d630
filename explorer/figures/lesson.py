"""The Learn page's figures, built once per graph or walk-through and patched per step (a Next click builds
no figure): the graph (:class:`remat_core.viz.LessonGraph`), the separator tree, the memory timeline."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from remat_core import ComputeGraph
from remat_core.analysis import RecursionWalk, WalkStep
from remat_core.graph import node_labels
from remat_core.viz import (LessonGraph, memory_timeline_figure, numbered_bags, separator_tree_at, step_ready,
                            timeline_at, tree_of_bags_figure)

GRAPH_HEIGHT = 360
TREE_HEIGHT = 280
TIMELINE_HEIGHT = 280


@dataclass(frozen=True)
class WalkFigures:
    """The figures of one walk-through before any step is drawn on them (plotly dicts)."""

    graph: LessonGraph
    tree: dict
    timeline: dict


@st.cache_resource(show_spinner=False, max_entries=32)
def walk_figures(walk_key: tuple, _graph: ComputeGraph, _walk: RecursionWalk, budget: int | None) -> WalkFigures:
    """The graph laid out, the separator tree and the timeline of a walk-through, kept by ``walk_key``."""
    del walk_key
    trace = _walk.trace
    separators = trace.separators
    edges = [(parent, child) for child, parent in enumerate(separators.parent) if parent >= 0]
    tree = numbered_bags(tree_of_bags_figure(trace.decomposition.bags, edges, root=separators.root,
                                             labels=node_labels(_graph), height=TREE_HEIGHT))
    timeline = step_ready(memory_timeline_figure(_graph, _walk.schedule, budget, animate=False,
                                                 height=TIMELINE_HEIGHT))
    return WalkFigures(LessonGraph(_graph, GRAPH_HEIGHT), tree, timeline)


def step_figures(figures: WalkFigures, graph: ComputeGraph, walk: RecursionWalk, step: WalkStep,
                 picked: str | None) -> tuple[dict, ...]:
    """The graph, separator tree and timeline at ``step``: the call's subgraph, its bag, what is resident,
    what the step computes; the open calls' frames; the cursor after the step, the call's ops shaded.
    Each carries the step in ``layout.meta`` (:func:`stamped`)."""
    call = walk.calls[step.call]
    resident = walk.schedule.simulation.resident_after(graph, step.last_op)
    drawn = figures.graph.at(subgraph=call.subgraph, bag=call.bag, resident=resident, computed=dict(step.computed),
                             selected=picked)
    frames = [walk.calls[c].frame for c in walk.ancestors(call.index)]
    tree = separator_tree_at(figures.tree, open_frames=frames, frame=call.frame)
    timeline = timeline_at(figures.timeline, graph, walk.schedule, step.last_op, span=(call.first_op, call.end_op))
    return tuple(stamped(f, step.index) for f in (drawn, tree, timeline))


def stamped(figure: dict, step: int) -> dict:
    """The figure with the step it shows in ``layout.meta`` (plotly keeps it on the drawn chart: a browser
    test or benchmark can tell when a chart shows a step)."""
    return {"data": figure["data"], "layout": {**figure["layout"], "meta": {"step": step}}}
