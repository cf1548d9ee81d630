"""The Learn page's example graph, its solver choice, and which decomposition a recursive solver's
frames refer to (its step-by-step DAG: :func:`explorer.figures.graph.lesson_dag`)."""

from __future__ import annotations

from typing import Any, Mapping

import streamlit as st

from remat_core import ComputeGraph
from remat_core.graph import training_chain

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


def recursion_decomposition(solver: str, options: Mapping[str, Any]) -> dict[str, str]:
    """The decompositions to draw for ``solver`` and which one its reasons' ``frame`` numbers refer to.

    The separator recursion solvers number their frames by the bags of the decomposition they
    recurse on: ``treewidth`` a tree decomposition (its ``heuristic`` option, default min_degree),
    ``pathwidth`` a path decomposition (its ``method`` option, default best). Returns
    ``{"tree": method, "path": method, "frame_of": kind}`` (``frame_of`` only for those two).
    """
    methods = {"tree": str(options.get("heuristic", "min_degree")), "path": str(options.get("method", "best"))}
    if solver == "treewidth":
        methods["frame_of"] = "tree"
    elif solver == "pathwidth":
        methods["frame_of"] = "path"
    return methods
