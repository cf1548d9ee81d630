"""The Learn page's example graph, its solver choice and its step-by-step DAG."""

from __future__ import annotations

import streamlit as st

from remat_core import ComputeGraph
from remat_core.generators import training_chain
from remat_core.views import full_view
from remat_core.viz import dag_html
from remat_core.viz.palette import RECOMPUTE_COLOR

EXAMPLE_LAYERS = 6
TEACHING_SOLVERS = ("treewidth", "pathwidth", "chen-sqrt", "rotor", "griewank", "dtr")
"""The Learn page starts on the first of these that is registered (recursive solvers first)."""


@st.cache_resource(show_spinner=False)
def example_graph() -> ComputeGraph:
    """A 6-layer chain's training graph, 1 MiB per activation."""
    return training_chain(EXAMPLE_LAYERS, mem=2**20, name="learn-chain-6")


def learn_solver(names: list[str]) -> str:
    """The solver the lesson opens with."""
    return next((s for s in TEACHING_SOLVERS if s in names), next((s for s in names if s != "checkpoint-all"),
                                                                   names[0]))


@st.cache_data(max_entries=64, show_spinner=False)
def lesson_dag(_graph: ComputeGraph, resident: tuple[str, ...], current: tuple[str, ...]) -> str:
    """The example DAG with the resident tensors outlined and the ones just computed in orange."""
    view = full_view(_graph)
    return dag_html(view, highlight=set(resident) | set(current) if resident or current else (),
                    colors={n: RECOMPUTE_COLOR for n in current}, height_px=280)
