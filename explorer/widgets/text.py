"""Text helpers every page uses: names from files shown as typed, tensor names, percents."""

from __future__ import annotations

import re
from typing import Any

from remat_core.graph import node_label

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def plain(text: Any) -> str:
    """Text from a file shown in markdown as typed (no links, images, emphasis or HTML)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


def tensor_name(graph, node_id: str) -> str:
    """A node's name for people: its label (:func:`remat_core.graph.node_label`: module path and op, pass
    marked, unique), never its id."""
    return node_label(graph, node_id)


def percent(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "—"
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def number(value: float) -> str:
    """A count or a cost as a reader takes it in at a glance: ``1,234``, ``11.17 billion`` (never ``1.11712e+10``)."""
    magnitude = abs(value)
    for size, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if magnitude >= size:
            return f"{value / size:.4g} {word}"
    return f"{value:,.0f}" if float(value).is_integer() or magnitude >= 100 else f"{value:.3g}"
