"""The Distributed page's figures, built by :mod:`remat_core.viz.distributed` and cached by what they show."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from remat_core.frontends.gnn import TRAFFIC_OPS, GnnModel
from remat_core.viz.distributed import worker_peaks_figure, worker_timelines_figure

from ..state.gnn import simulated_modes


def _fetch_steps(worker) -> dict[str, list[int]]:
    graph = worker.step.graph
    steps: dict[str, list[int]] = {}
    for i, (action, node) in enumerate(worker.step.ops):
        op = graph.node(node).op
        if action == "compute" and op in TRAFFIC_OPS:
            steps.setdefault(TRAFFIC_OPS[op], []).append(i)
    return steps


@st.cache_resource(max_entries=16, show_spinner=False)
def timelines_figure(spec: str, workers: int, method: str, model: GnnModel, worker: int) -> go.Figure:
    modes = simulated_modes(spec, workers, method, model)
    chosen = {label: simulated[worker] for label, (_, simulated) in modes.items()}
    return worker_timelines_figure({label: w.memory for label, w in chosen.items()},
                                   {label: _fetch_steps(w) for label, w in chosen.items()}, worker)


@st.cache_resource(max_entries=16, show_spinner=False)
def peaks_figure(spec: str, workers: int, method: str, model: GnnModel, measured: tuple | None) -> go.Figure:
    modes = simulated_modes(spec, workers, method, model)
    return worker_peaks_figure({label: [w.peak for w in simulated] for label, (_, simulated) in modes.items()},
                               dict(measured) if measured else None)
