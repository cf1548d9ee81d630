"""Pictures of the graph: the Graph page's view (levels of detail, layered layout, a schedule laid over it)
and the Learn page's example DAG, cached by the graph's content hash."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from remat_core import ComputeGraph
from remat_core.analysis import GraphView, Layout, full_view, graph_view, layered_layout, schedule_status
from remat_core.schedule import SimulationResult
from remat_core.viz import RECOMPUTE_COLOR, dag_html, graph_view_figure


@st.cache_data(max_entries=16, show_spinner=False)
def laid_out_view(graph_key: str, _graph: ComputeGraph, expanded: frozenset[str]) -> tuple[GraphView, Layout]:
    """The view of the graph with the groups in ``expanded`` open, and its layered layout."""
    del graph_key
    view = graph_view(_graph, expanded)
    return view, layered_layout(view)


def graph_view_chart(graph: ComputeGraph, view: GraphView, layout: Layout, simulation: SimulationResult | None,
                     step: int | None, selected: int | None, focus: frozenset[int], marked: frozenset[int],
                     title: str | None, uirevision: str) -> go.Figure:
    """The view coloured by kind, or by the schedule's statuses (over the whole run, or after ``step``).

    Not cached: a 10,000-node figure takes as long to unpickle from Streamlit's cache as to build
    (about 0.3 s); the view and its layout are the cached part.
    """
    status = schedule_status(graph, simulation, step).in_view(view) if simulation is not None else None
    return graph_view_figure(view, layout, status=status, selected=selected, focus=focus, marked=marked,
                             title=title, uirevision=uirevision)


@st.cache_data(max_entries=64, show_spinner=False)
def lesson_dag(graph_key: str, _graph: ComputeGraph, resident: tuple[str, ...], current: tuple[str, ...]) -> str:
    """The example DAG with the resident tensors outlined and the ones just computed in orange."""
    del graph_key
    view = full_view(_graph)
    return dag_html(view, highlight=set(resident) | set(current) if resident or current else (),
                    colors={n: RECOMPUTE_COLOR for n in current}, height_px=280)
