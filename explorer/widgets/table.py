"""Small tables whose missing values say why: a dash with the reason as its tooltip, never ``None``.

Streamlit's data grid shows a missing value as ``None`` and has no per-cell tooltip, so these
tables are plain HTML (escaped) in Markdown: a :class:`Missing` cell is drawn as ``—`` with a
``title`` (the browser's tooltip), and a column's help as the header's tooltip (underlined with dots).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Mapping, Sequence

import streamlit as st

DASH = "—"


@dataclass(frozen=True)
class Missing:
    """A value that is not there, and why (a dash in the table, the reason on hover)."""

    why: str

    def __str__(self) -> str:
        return DASH


def cell_text(value: Any) -> str:
    """What a cell shows: the value, or a dash for a missing one (never ``None``)."""
    return DASH if value is None or isinstance(value, Missing) else str(value)


def html_table(rows: Sequence[Mapping[str, Any]], column_help: Mapping[str, str] | None = None) -> str:
    """Rows of one shape (the header from the first row's keys) as an HTML table; values escaped."""
    if not rows:
        return ""
    helps = column_help or {}
    columns = list(rows[0])

    def th(name: str) -> str:
        if name not in helps:
            return f"<th>{escape(name)}</th>"
        return f'<th title="{escape(helps[name])}" style="text-decoration: underline dotted">{escape(name)}</th>'

    def td(value: Any) -> str:
        if isinstance(value, Missing):
            return f'<td title="{escape(value.why)}" class="missing">{DASH}</td>'
        if value is None:
            raise ValueError("a missing value needs its reason: use Missing(why)")
        return f"<td>{escape(str(value))}</td>"

    head = "".join(th(c) for c in columns)
    body = "".join("<tr>" + "".join(td(row[c]) for c in columns) + "</tr>" for row in rows)
    return f'<table class="remat-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def table(rows: Sequence[Mapping[str, Any]], column_help: Mapping[str, str] | None = None) -> None:
    """Draw :func:`html_table` (missing values as dashes with their reason on hover)."""
    st.markdown(html_table(rows, column_help), unsafe_allow_html=True)
