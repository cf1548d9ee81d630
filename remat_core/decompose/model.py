"""The result objects of :mod:`remat_core.decompose` and their JSON form.

A :class:`Decomposition` is a tree decomposition (``kind="tree"``) or a path decomposition
(``kind="path"``: a tree decomposition whose tree is the path ``0 - 1 - ... - N-1``) of a graph's
undirected skeleton, pinned nodes left out. Bags hold node ids; tree edges are pairs of bag
positions. Width, the method that built it and the seconds it took travel with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import DecompositionError
from ..graph import ComputeGraph

DECOMPOSITION_FORMAT = "remat-decomposition"
DECOMPOSITION_FORMAT_VERSION = 1
KINDS = ("tree", "path")


@dataclass(frozen=True)
class Decomposition:
    """A tree or path decomposition of a graph's skeleton.

    Parameters
    ----------
    kind : {"tree", "path"}
    bags : tuple of tuple of str
        Each bag's node ids, in graph order.
    edges : tuple of (int, int)
        Tree edges between bag positions; for a path, ``(i, i + 1)`` for every i.
    method : str
        What built it (``min_degree``, ``min_fill``, ``exact``, ``vertex_separation``, ``from_tree``).
    seconds : float
        Wall time the method took (for a cached decomposition: the first computation's time).
    graph : str
        The graph's name.
    info : mapping
        What else the method knows (an exact method's lower bound, the candidates a path search
        compared, ...).
    """

    kind: str
    bags: tuple[tuple[str, ...], ...]
    edges: tuple[tuple[int, int], ...]
    method: str
    seconds: float
    graph: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise DecompositionError(f"unknown decomposition kind {self.kind!r}; expected one of {', '.join(KINDS)}")

    @property
    def width(self) -> int:
        """Largest bag size minus one (-1 for a decomposition without bags)."""
        return max((len(b) for b in self.bags), default=0) - 1

    def __len__(self) -> int:
        return len(self.bags)

    def bag_indices(self, graph: ComputeGraph) -> tuple[tuple[int, ...], ...]:
        """The bags as graph node indices; :class:`DecompositionError` for an id the graph lacks."""
        index = graph.index
        try:
            return tuple(tuple(index[v] for v in bag) for bag in self.bags)
        except KeyError as e:
            raise DecompositionError(f"decomposition bag holds {e.args[0]!r}, which is no node of graph "
                                     f"'{graph.name}'") from None

    def to_json(self, separators: Any = None) -> dict[str, Any]:
        """The decomposition as a ``remat-decomposition`` v1 document.

        Parameters
        ----------
        separators : SeparatorTree, optional
            Included under ``"separator_tree"`` when given.
        """
        doc: dict[str, Any] = {"format": DECOMPOSITION_FORMAT, "version": DECOMPOSITION_FORMAT_VERSION,
                               "kind": self.kind, "graph": self.graph, "method": self.method,
                               "width": self.width, "seconds": self.seconds,
                               "bags": [list(b) for b in self.bags], "edges": [list(e) for e in self.edges]}
        if self.info:
            doc["info"] = dict(self.info)
        if separators is not None:
            doc["separator_tree"] = separators.to_json()
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "Decomposition":
        """Read a ``remat-decomposition`` v1 document (a ``separator_tree`` in it is ignored).

        Raises
        ------
        DecompositionError
            When the document is not a decomposition or a bag or edge is malformed.
        """
        if not isinstance(doc, Mapping):
            raise DecompositionError(f"a decomposition document must be a JSON object, got {type(doc).__name__}")
        if doc.get("format") != DECOMPOSITION_FORMAT or doc.get("version") != DECOMPOSITION_FORMAT_VERSION:
            raise DecompositionError(f"not a {DECOMPOSITION_FORMAT} v{DECOMPOSITION_FORMAT_VERSION} document: "
                                     f"got format {doc.get('format')!r}, version {doc.get('version')!r}")
        bags = doc.get("bags")
        if not isinstance(bags, list) or not all(isinstance(b, list) and all(isinstance(v, str) for v in b)
                                                 for b in bags):
            raise DecompositionError("decomposition: \"bags\" must be a list of lists of node ids")
        edges = doc.get("edges", [])
        if not isinstance(edges, list) or not all(
                isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                            for x in e) for e in edges):
            raise DecompositionError("decomposition: \"edges\" must be a list of [bag, bag] pairs of integers")
        seconds = doc.get("seconds", 0.0)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise DecompositionError(f"decomposition: \"seconds\" must be a number, got {seconds!r}")
        info = doc.get("info", {})
        if not isinstance(info, Mapping):
            raise DecompositionError("decomposition: \"info\" must be an object")
        return cls(kind=str(doc.get("kind")), bags=tuple(tuple(b) for b in bags),
                   edges=tuple((int(a), int(b)) for a, b in edges), method=str(doc.get("method", "")),
                   seconds=float(seconds), graph=str(doc.get("graph", "")), info=dict(info))


def bags_in_graph_order(graph: ComputeGraph, vertices: tuple[int, ...],
                        local_bags: list[tuple[int, ...]] | list[frozenset[int]]) -> tuple[tuple[str, ...], ...]:
    """Bags over a skeleton's local numbering -> bags of node ids in graph order."""
    ids = graph.ids
    return tuple(tuple(ids[g] for g in sorted(vertices[u] for u in bag)) for bag in local_bags)
