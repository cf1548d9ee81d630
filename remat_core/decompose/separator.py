"""Balanced separator trees: the recursion structure of the treewidth and pathwidth solvers.

A separator tree puts one bag of a decomposition at the root and, below it, the separator trees of
the pieces that removing that bag leaves. For a tree decomposition the root is a *centroid*: every
piece holds at most half of the bags (a centroid decomposition, found by walking from any bag
towards the heavier side). For a path decomposition the root is the middle bag and the two halves
hang below it. Either way the height is at most ``floor(log2 N)`` for N bags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import DecompositionError
from .model import Decomposition


@dataclass(frozen=True)
class SeparatorTree:
    """A rooted tree over the bags of one decomposition (each node is a bag, named by its position).

    Attributes
    ----------
    root : int
        The top separator bag.
    parent : tuple of int
        Per bag, its parent in the separator tree (-1 for the root).
    children : tuple of tuple of int
        Per bag, the roots of the pieces below it.
    depth : tuple of int
        Per bag, its distance from the root.
    """

    root: int
    parent: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    depth: tuple[int, ...]

    @property
    def height(self) -> int:
        """The largest depth (0 for a single bag)."""
        return max(self.depth, default=0)

    def to_json(self) -> dict[str, Any]:
        """``{"root", "height", "nodes": [{"bag", "parent", "depth", "children"}]}``."""
        return {"root": self.root, "height": self.height,
                "nodes": [{"bag": b, "parent": self.parent[b], "depth": self.depth[b],
                           "children": list(self.children[b])} for b in range(len(self.parent))]}


def separator_tree(decomposition: Decomposition) -> SeparatorTree:
    """The balanced separator tree of a decomposition: centroids for a tree, middle bags for a path.

    Raises
    ------
    DecompositionError
        For a decomposition without bags.

    Notes
    -----
    O(N log N) for N bags: each level of the recursion walks every piece once.
    """
    n = len(decomposition.bags)
    if n == 0:
        raise DecompositionError("a decomposition without bags has no separator tree")
    if decomposition.kind == "path":
        parent = _middle_split(n)
    else:
        parent = _centroid_split(n, decomposition.edges)
    children: list[list[int]] = [[] for _ in range(n)]
    root = -1
    for b, p in enumerate(parent):
        if p < 0:
            root = b
        else:
            children[p].append(b)
    depth = [0] * n
    stack = [root]
    while stack:
        b = stack.pop()
        for c in children[b]:
            depth[c] = depth[b] + 1
            stack.append(c)
    return SeparatorTree(root, tuple(parent), tuple(tuple(c) for c in children), tuple(depth))


def _middle_split(n: int) -> list[int]:
    parent = [-1] * n
    stack = [(0, n - 1, -1)]
    while stack:
        lo, hi, up = stack.pop()
        if lo > hi:
            continue
        mid = (lo + hi) // 2
        parent[mid] = up
        stack.append((lo, mid - 1, mid))
        stack.append((mid + 1, hi, mid))
    return parent


def _centroid_split(n: int, edges: tuple[tuple[int, int], ...]) -> list[int]:
    adjacency: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        adjacency[a].append(b)
        adjacency[b].append(a)
    removed = bytearray(n)
    parent = [-1] * n
    stack = [(0, -1)]
    while stack:
        start, up = stack.pop()
        centre = _centroid(adjacency, removed, start)
        parent[centre] = up
        removed[centre] = 1
        stack.extend((b, centre) for b in adjacency[centre] if not removed[b])
    return parent


def _centroid(adjacency: list[list[int]], removed: bytearray, start: int) -> int:
    """The bag whose removal leaves pieces of at most half the piece containing ``start``."""
    order, up = [start], {start: -1}
    for a in order:
        for b in adjacency[a]:
            if not removed[b] and b not in up:
                up[b] = a
                order.append(b)
    size = dict.fromkeys(order, 1)
    for a in reversed(order[1:]):
        size[up[a]] += size[a]
    total = len(order)
    centre = start
    while True:
        heavy = next((b for b in adjacency[centre] if not removed[b] and up.get(b) == centre
                      and size[b] > total // 2), None)
        if heavy is None:
            return centre
        centre = heavy
