"""Rows of figures and controls that wrap onto more rows in a narrow window instead of cutting their text."""

from __future__ import annotations

from typing import Any

import streamlit as st


def wrapping_row(container: Any = st, gap: str = "medium") -> Any:
    """A horizontal container: its children keep their width and wrap at the window's edge (1024 px laptops)."""
    return container.container(horizontal=True, gap=gap)


def figure_metric(row: Any, label: str, value: Any, note: str | None = None) -> None:
    """A metric as wide as its text, ``note`` in grey below it (a note, not a change: no arrow, no colour)."""
    row.metric(label, value, delta=note, width="content", delta_color="off", delta_arrow="off")
