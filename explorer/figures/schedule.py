"""The figures of the Schedule, Timeline and Why pages: the Pareto chart, and the memory timeline, lifetime
chart, memory map (with its memory_viz snapshot) and a tensor's neighbourhood of one solve; cached by the graph's content hash (the graph itself is
passed as ``_graph``).

They are kept as plotly ``Figure`` objects (``st.cache_resource``, never mutated), not as dicts:
``st.plotly_chart`` rebuilds and validates a figure handed over as a dict on every run (tens of
milliseconds for the Pareto chart, seconds for a long animated timeline), while a ``Figure`` it
only serialises.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go
import streamlit as st

from remat_core import ComputeGraph, Schedule
from remat_core.analysis import ParetoCurve, tensor_neighbourhood
from remat_core.schedule import AllocatorConfig, AllocatorReplay, replay, simulation_of, snapshot_pickle
from remat_core.viz import (lifetime_candidates, lifetime_chart, memory_map_figure, memory_timeline_figure,
                            neighbourhood_html, pareto_figure, transfer_lane_figure)

from ..jobs.results import awaited_solve, options_key


def pareto_chart(graph_key: str, curves: Sequence[ParetoCurve], *, lower_bound: int, checkpoint_all_peak: int,
                 budget: int, current: dict[str, float | None], best_possible: Sequence[tuple[int, float]],
                 log_y: bool) -> go.Figure:
    """The Pareto figure (:func:`remat_core.viz.pareto_figure`), built once per content: the Schedule page
    draws it again on every poll while work runs."""
    content = tuple((c.solver, options_key(dict(c.options)), len(c.points)) for c in curves)
    return _pareto_chart(graph_key, content, tuple(curves), lower_bound, checkpoint_all_peak, budget,
                         tuple(current.items()), tuple(best_possible), log_y)


@st.cache_resource(max_entries=64, show_spinner=False)
def _pareto_chart(graph_key: str, content: tuple, _curves: tuple[ParetoCurve, ...], lower_bound: int,
                  checkpoint_all_peak: int, budget: int, current: tuple, best_possible: tuple,
                  log_y: bool) -> go.Figure:
    return pareto_figure(_curves, lower_bound=lower_bound, checkpoint_all_peak=checkpoint_all_peak, budget=budget,
                         current=dict(current), best_possible=list(best_possible), log_y=log_y)


@st.cache_resource(max_entries=8, show_spinner=False)
def memory_figure(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
                  time_limit: float | None, measured: tuple[int, ...] | None = None) -> go.Figure:
    """The animated memory timeline of one solve (with the ``measured`` bytes after each op, when the
    schedule was run on real tensors)."""
    return memory_timeline_figure(_graph, _feasible(_graph, solver, budget, options, time_limit), measured=measured)


@st.cache_resource(max_entries=8, show_spinner=False)
def transfer_figure(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
                    time_limit: float | None) -> go.Figure:
    """The transfer lane of one solve timed over a host link (its copies, waits and host bytes)."""
    return transfer_lane_figure(_graph, _feasible(_graph, solver, budget, options, time_limit))


@st.cache_resource(max_entries=8, show_spinner=False)
def lifetime_figure(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
                    time_limit: float | None, max_rows: int, recomputed_only: bool,
                    module: str | None) -> tuple[go.Figure, int]:
    """The lifetime chart of one solve (rows as :func:`remat_core.viz.timeline.lifetime_candidates` picks
    them), and how many tensors could be shown."""
    schedule = _feasible(_graph, solver, budget, options, time_limit)
    total = len(lifetime_candidates(_graph, schedule, recomputed_only, module))
    return lifetime_chart(_graph, schedule, max_rows=max_rows, recomputed_only=recomputed_only, module=module), total


@st.cache_resource(max_entries=8, show_spinner=False)
def memory_map(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
               time_limit: float | None, allocator: str) -> tuple[go.Figure, AllocatorReplay, bytes]:
    """One solve's allocations through the caching-allocator model with ``allocator``'s settings
    (``PYTORCH_CUDA_ALLOC_CONF`` text, already checked): the memory map, the replay, and its memory_viz snapshot."""
    schedule = _feasible(_graph, solver, budget, options, time_limit)
    replayed = replay(_graph, schedule, AllocatorConfig.parse(allocator))
    labels = {n.id: n.display_name for n in _graph.nodes}
    return memory_map_figure(_graph, replayed), replayed, snapshot_pickle(replayed, labels)


def _feasible(graph: ComputeGraph, solver: str, budget: int, options: tuple, time_limit: float | None) -> Schedule:
    outcome = awaited_solve(graph, budget, solver, options, time_limit)
    if outcome.schedule is None:
        raise ValueError("the timeline figures need a feasible solve; check awaited_solve first")
    return outcome.schedule


@st.cache_data(max_entries=16, show_spinner=False)
def neighbourhood_page(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
                       time_limit: float | None, tensor: str) -> tuple[str, int, int]:
    """The Why page's drag-apart view of ``tensor``'s neighbourhood under one solve
    (:func:`remat_core.viz.neighbourhood_html`): the HTML, how many nodes it draws, and how many it left out."""
    schedule = _feasible(_graph, solver, budget, options, time_limit)
    hood = tensor_neighbourhood(_graph, simulation_of(schedule), tensor)
    return neighbourhood_html(_graph, hood), len(hood.nodes), hood.left_out
