"""Names people read: one unique label per node, module path and op, forward or backward marked.

Ids are for programs (``getitem_216``, ``f3``); everywhere a person reads a node (figures, tables,
explanations, downloads meant for people) it is named by :func:`node_labels`, e.g.
``layer1.0.conv1 · convolution (fwd)`` or ``layer1.0.conv1 · convolution_backward[1] (bwd)``. Two
nodes that would read the same get ``#2``, ``#3``... in graph order. :func:`node_by_label` reads a
label back (a link names its tensor by label), falling back to the id.
"""

from __future__ import annotations

from typing import Mapping

from .compute_graph import ComputeGraph, Node

PASS_MARKS = {"forward": "fwd", "loss": "loss", "backward": "bwd"}
"""How a node's pass is marked in its label (pinned kinds name themselves: ``param``, ``input``...)."""
SEPARATOR = " · "


def short_name(node: Node) -> str | None:
    """The node's own short name: its label, else its operator without the namespace (``aten.mm`` -> ``mm``);
    None when it has neither (only its id would name it)."""
    if node.label:
        return node.label
    if node.op:
        return node.op.rsplit(".", 1)[-1].lstrip("_") or node.op
    return None


def base_label(node: Node) -> str:
    """A node's label before it is made unique: module path and op, with its pass or kind marked."""
    name = short_name(node)
    module = node.module
    last = module.rsplit(".", 1)[-1] if module else ""
    if module and name and name.startswith(last + " ") and name[len(last):].strip():
        # a module-level label such as "conv1 fwd" repeats the module's last part: say it once, as
        # "layer1.0.conv1 · fwd" (a top-level module too: "conv1 · fwd")
        text = f"{module}{SEPARATOR}{name[len(last):].strip()}"
    elif module and name and not _names_module(name, module):
        text = f"{module}{SEPARATOR}{name}"
    else:
        text = name or node.id
    mark = PASS_MARKS.get(node.kind, node.kind)
    words = text.replace("#", " ").split()
    if node.kind == "other" or mark in words or (node.kind == "backward" and "grad" in words):
        return text
    return f"{text} ({mark})"


def _names_module(name: str, module: str) -> bool:
    """Whether ``name`` already names ``module``: ``conv1.weight``, ``grad layer1.conv1.weight``."""
    return any(word == module or word.startswith(module + ".") for word in name.split())


def node_labels(graph: ComputeGraph) -> Mapping[str, str]:
    """``id -> label`` for every node of ``graph``, unique, in graph order (computed once per graph)."""
    def build() -> dict[str, str]:
        labels: dict[str, str] = {}
        seen: dict[str, int] = {}
        taken = set()
        for node in graph.nodes:
            text = base_label(node)
            count = seen.get(text, 0) + 1
            seen[text] = count
            unique = text if count == 1 else f"{text} #{count}"
            while unique in taken:  # a real label that already reads "x #2"
                count += 1
                unique = f"{text} #{count}"
            taken.add(unique)
            labels[node.id] = unique
        return labels
    return graph.memo("node_labels", build)


def node_label(graph: ComputeGraph, node_id: str) -> str:
    """The label of one node (see :func:`node_labels`)."""
    return node_labels(graph)[node_id]


def node_by_label(graph: ComputeGraph, text: str) -> str | None:
    """The id of the node labelled ``text`` (or whose id is ``text``, as a fallback); None if there is none."""
    def build() -> dict[str, str]:
        return {label: node_id for node_id, label in node_labels(graph).items()}
    found = graph.memo("nodes_by_label", build).get(text)
    if found is not None:
        return found
    return text if text in graph else None
