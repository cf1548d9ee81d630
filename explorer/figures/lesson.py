"""The Learn page's step figures (ECharts options), laid out once per graph or walk-through and given per step
(a Next click lays nothing out): the graph, the separator tree, the memory timeline."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from remat_core import ComputeGraph
from remat_core.analysis import RecursionWalk, WalkStep
from remat_core.graph import node_labels
from remat_core.viz import LessonGraph, SeparatorTreeChart, TimelineChart

GRAPH_HEIGHT = 300
TREE_HEIGHT = 210
TIMELINE_HEIGHT = 210
"""Sized so that a step (its controls, the graph beside the call's card, the tree and the memory timeline) fits
one 1024x768 screen: a lesson can be projected in a classroom."""


@dataclass(frozen=True)
class WalkFigures:
    """The figures of one walk-through, laid out."""

    graph: LessonGraph
    tree: SeparatorTreeChart
    timeline: TimelineChart


@st.cache_resource(show_spinner=False, max_entries=32)
def walk_figures(walk_key: tuple, _graph: ComputeGraph, _walk: RecursionWalk, budget: int | None) -> WalkFigures:
    """The graph, the separator tree and the timeline of a walk-through laid out, kept by ``walk_key``."""
    del walk_key
    separators = _walk.trace.separators
    return WalkFigures(LessonGraph(_graph),
                       SeparatorTreeChart(_walk.trace.decomposition.bags, separators.parent, separators.root,
                                          node_labels(_graph)),
                       TimelineChart(_graph, _walk.schedule, budget))


def step_figures(figures: WalkFigures, graph: ComputeGraph, walk: RecursionWalk, step: WalkStep,
                 picked: str | None) -> tuple[dict, dict, dict]:
    """The graph, separator tree and timeline at ``step``: the call's subgraph, its bag, what is resident,
    what the step computes; the open calls' frames; the cursor after the step, the call's ops shaded."""
    call = walk.calls[step.call]
    resident = walk.schedule.simulation.resident_after(graph, step.last_op)
    drawn = figures.graph.at(subgraph=call.subgraph, bag=call.bag, resident=resident, computed=dict(step.computed),
                             selected=picked)
    tree = figures.tree.at(open_frames=[walk.calls[c].frame for c in walk.ancestors(call.index)], frame=call.frame)
    return drawn, tree, figures.timeline.at(step.last_op, span=(call.first_op, call.end_op))
