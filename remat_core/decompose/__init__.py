"""Tree and path decompositions of a graph's skeleton, their checker and their separator trees.

The front door::

    from remat_core.decompose import tree_decomposition, path_decomposition, separator_tree, validate
    tree = tree_decomposition(graph, heuristic="min_fill")
    path = path_decomposition(graph)
    validate(path, graph)                       # raises DecompositionError if a property fails
    top = separator_tree(tree)                  # centroid bags at the top, pieces below

One module per job: :mod:`.tree` (networkx heuristics and the front door to :mod:`.exact`),
:mod:`.path` (vertex-separation orderings), :mod:`.validate`, :mod:`.separator`, and :mod:`.model`
(the :class:`Decomposition` result and its JSON). Decompositions are of the undirected skeleton
with pinned nodes left out (:mod:`._skeleton`).
"""

from ..errors import DecompositionError
from ..graph import ComputeGraph
from .exact import EXACT_MAX_VERTICES
from .model import DECOMPOSITION_FORMAT, Decomposition
from .path import PATH_METHODS, path_decomposition
from .separator import SeparatorTree, separator_tree
from .tree import TREE_HEURISTICS, tree_decomposition
from .validate import validate

KINDS = ("tree", "path")


def decompose(graph: ComputeGraph, kind: str = "tree", heuristic: str | None = None) -> Decomposition:
    """One front door for both kinds: ``kind="tree"`` takes a tree heuristic, ``"path"`` a path method.

    Raises
    ------
    DecompositionError
        For an unknown kind, heuristic or method.
    """
    if kind == "tree":
        return tree_decomposition(graph, heuristic or "min_degree")
    if kind == "path":
        return path_decomposition(graph, heuristic or "best")
    raise DecompositionError(f"unknown decomposition kind {kind!r}; expected one of {', '.join(KINDS)}")


__all__ = ["DECOMPOSITION_FORMAT", "Decomposition", "EXACT_MAX_VERTICES", "KINDS", "PATH_METHODS", "SeparatorTree",
           "TREE_HEURISTICS", "decompose", "path_decomposition", "separator_tree", "tree_decomposition", "validate"]
