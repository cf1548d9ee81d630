"""Text helpers every page uses: names from files shown as typed, tensor names, percents."""

from __future__ import annotations

import re
from typing import Any

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def plain(text: Any) -> str:
    """Text from a file shown in markdown as typed (no links, images, emphasis or HTML)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


def tensor_name(graph, node_id: str) -> str:
    """A node's label, with its module path when the label alone does not say where it is
    (module-level labels such as ``bn1 fwd`` repeat in every block)."""
    node = graph.node(node_id)
    name = node.display_name
    if node.module and not name.startswith(node.module):
        return f"{name} · {node.module}"
    return name


def percent(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "—"
    return f"{value:+.1%}" if signed else f"{value:.1%}"
