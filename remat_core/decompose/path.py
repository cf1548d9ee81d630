"""Path decompositions of a graph's skeleton, from width-minimising vertex orderings.

A vertex ordering ``v_0 .. v_{m-1}`` is a path decomposition: bag i is ``v_i`` plus every earlier
vertex that still has a neighbour at position i or later. Its width is the ordering's *vertex
separation*, and the minimum over orderings is the pathwidth. networkx has no pathwidth routine,
and a topological order's live sets are no answer: on a training graph they are as wide as the
forward pass, while forward and backward really interleave like the rungs of a ladder.

Orderings come from two places, and a local search improves the best:

- ``vertex_separation``: a greedy search that places, next, the frontier vertex that leaves the
  fewest placed vertices with unplaced neighbours (started at both ends of a pseudo-diameter, two
  tie-breaking rules).
- ``from_tree``: a depth-first walk of a tree decomposition that visits each bag's largest child
  subtree last; its width is at most ``(tw + 1)(log2 N + 1) - 1`` for a width-tw decomposition with
  N bags (see ``docs/algorithms.md``).

``best`` (the default) runs both and keeps the narrower.
"""

from __future__ import annotations

import heapq
import itertools
import random
import time
from typing import Sequence

import numpy as np

from ..errors import DecompositionError
from ..graph import ComputeGraph
from ._skeleton import Skeleton, skeleton
from .model import Decomposition, bags_in_graph_order
from .tree import TREE_HEURISTICS, tree_decomposition

PATH_METHODS = ("best", "vertex_separation", "from_tree")
"""The methods :func:`path_decomposition` takes."""

DEFAULT_LOCAL_SEARCH_MOVES = 300
"""Local-search attempts after the constructive orderings (each evaluates a few moves)."""

Objective = tuple[int, int, int]


def path_decomposition(graph: ComputeGraph, method: str = "best", *, tree_heuristic: str = "min_degree",
                       local_search_moves: int = DEFAULT_LOCAL_SEARCH_MOVES, seed: int = 0) -> Decomposition:
    """A path decomposition of ``graph``'s undirected skeleton, pinned nodes left out.

    Parameters
    ----------
    graph : ComputeGraph
    method : {"best", "vertex_separation", "from_tree"}
        Where the vertex ordering comes from (see the module notes); ``best`` tries both.
    tree_heuristic : str
        The tree decomposition ``from_tree`` walks (a :data:`~.tree.TREE_HEURISTICS` name).
    local_search_moves : int
        Attempts of the local search that follows (0: none), at most ten per vertex.
    seed : int
        Seed of the local search's random choices (results are deterministic for a seed).

    Returns
    -------
    Decomposition
        ``kind="path"``, reduced (no bag inside a neighbouring bag), with width and seconds; ``info``
        holds each candidate's width and the one that won. Cached on the graph per argument set.

    Raises
    ------
    DecompositionError
        For an unknown method or tree heuristic, or a negative number of moves.

    Notes
    -----
    The greedy runs in O(m log n) per start; one evaluation of an ordering is O(n + m) (numpy);
    the local search tries moving a vertex of a widest bag next to one of its neighbours (or that
    neighbour next to it) and keeps a move that lowers (width, number of widest bags, total bag
    size) lexicographically.

    References
    ----------
    N. G. Kinnersley, "The vertex separation number of a graph equals its path-width", Information
    Processing Letters 42(6), 1992.
    """
    if method not in PATH_METHODS:
        raise DecompositionError(f"unknown path decomposition method {method!r}; expected one of "
                                 f"{', '.join(PATH_METHODS)}")
    if tree_heuristic not in TREE_HEURISTICS:
        raise DecompositionError(f"unknown tree heuristic {tree_heuristic!r} for the from_tree ordering; expected "
                                 f"one of {', '.join(TREE_HEURISTICS)}")
    if isinstance(local_search_moves, bool) or not isinstance(local_search_moves, int) or local_search_moves < 0:
        raise DecompositionError(f"local_search_moves must be a non-negative integer, got {local_search_moves!r}")
    key = f"decompose.path.{method}.{tree_heuristic}.{local_search_moves}.{seed}"
    return graph.memo(key, lambda: _path_decomposition_impl(graph, method, tree_heuristic, local_search_moves, seed))


def _path_decomposition_impl(graph: ComputeGraph, method: str, tree_heuristic: str, moves: int,
                             seed: int) -> Decomposition:
    sk = skeleton(graph)
    started = time.perf_counter()
    profile = OrderingProfile(sk)
    rank = _topological_rank(graph, sk)
    candidates: dict[str, list[int]] = {}
    if method in ("best", "vertex_separation"):
        candidates["vertex_separation"] = min(_greedy_orderings(sk, rank), key=profile.objective)
    if method in ("best", "from_tree"):
        tree = tree_decomposition(graph, tree_heuristic)
        candidates["from_tree"] = tree_ordering(sk, _local_bags(graph, sk, tree.bags), tree.edges, rank)
    widths = {name: profile.objective(order)[0] for name, order in candidates.items()}
    winner = min(candidates, key=lambda name: profile.objective(candidates[name]))
    order = local_search(profile, candidates[winner], moves, random.Random(seed))
    local_bags = reduce_path(ordering_bags(sk, order))
    seconds = time.perf_counter() - started
    info = {"candidate_widths": widths, "from": winner, "local_search_moves": moves}
    return Decomposition("path", bags_in_graph_order(graph, sk.vertices, local_bags),
                         tuple((i, i + 1) for i in range(len(local_bags) - 1)), winner, seconds, graph.name, info)


def _topological_rank(graph: ComputeGraph, sk: Skeleton) -> list[int]:
    position = {g: p for p, g in enumerate(graph.topo_idx)}
    return [position[g] for g in sk.vertices]


def _local_bags(graph: ComputeGraph, sk: Skeleton, bags: Sequence[Sequence[str]]) -> list[list[int]]:
    local = {g: u for u, g in enumerate(sk.vertices)}
    return [[local[graph.index[v]] for v in bag] for bag in bags]


# -- evaluating an ordering ------------------------------------------------------------------------

class OrderingProfile:
    """Bag sizes of vertex orderings of one skeleton, in O(n + m) numpy per ordering.

    Attributes
    ----------
    size : int
        Number of vertices.
    neighbour, neighbour_ptr : numpy arrays
        The adjacency in CSR form: the neighbours of u are
        ``neighbour[neighbour_ptr[u]:neighbour_ptr[u + 1]]``.
    """

    def __init__(self, sk: Skeleton):
        self.size = len(sk)
        degrees = np.fromiter((len(n) for n in sk.neighbours), dtype=np.int64, count=self.size)
        self.neighbour_ptr = np.concatenate(([0], np.cumsum(degrees)))
        self.neighbour = np.fromiter(itertools.chain.from_iterable(sk.neighbours), dtype=np.int64,
                                     count=int(degrees.sum()))
        self._has_neighbours = degrees > 0
        self._starts = self.neighbour_ptr[:-1][self._has_neighbours]
        self._ones = np.arange(1, self.size + 1)

    def spans(self, order: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``(pos, last)``: each vertex's position, and the position of its last neighbour (or its own)."""
        pos = np.empty(self.size, dtype=np.int64)
        pos[np.asarray(order, dtype=np.int64)] = np.arange(self.size)
        last = pos.copy()
        if len(self.neighbour):
            furthest = np.maximum.reduceat(pos[self.neighbour], self._starts)
            last[self._has_neighbours] = np.maximum(furthest, pos[self._has_neighbours])
        return pos, last

    def sizes(self, order: Sequence[int]) -> np.ndarray:
        """Bag size at each position: vertices placed at or before it with a neighbour at or after it."""
        _, last = self.spans(order)
        closed = np.cumsum(np.bincount(last, minlength=self.size))
        return self._ones - np.concatenate(([0], closed[:-1]))

    def objective(self, order: Sequence[int]) -> Objective:
        """(width, number of widest bags, total bag size): smaller is better."""
        return _objective(self.sizes(order))


def _objective(sizes: np.ndarray) -> Objective:
    widest = int(sizes.max())
    return widest - 1, int(np.count_nonzero(sizes == widest)), int(sizes.sum())


def ordering_bags(sk: Skeleton, order: Sequence[int]) -> list[tuple[int, ...]]:
    """The path decomposition of an ordering: bag i is ``order[i]`` plus the still-open earlier vertices."""
    position = {v: i for i, v in enumerate(order)}
    last = [max([position[v]] + [position[w] for w in sk.neighbours[v]]) for v in range(len(sk))]
    closing: dict[int, list[int]] = {}
    for v, end in enumerate(last):
        closing.setdefault(end, []).append(v)
    open_now: set[int] = set()
    bags = []
    for i, v in enumerate(order):
        open_now.add(v)
        bags.append(tuple(sorted(open_now)))
        open_now.difference_update(closing.get(i, ()))
    return bags


def reduce_path(bags: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Drop every bag that is a subset of a neighbouring bag (the path stays a decomposition)."""
    kept: list[frozenset[int]] = []
    for bag in map(frozenset, bags):
        while kept and kept[-1] <= bag:
            kept.pop()
        if not kept or not bag <= kept[-1]:
            kept.append(bag)
    return [tuple(sorted(b)) for b in kept]


# -- constructing orderings ------------------------------------------------------------------------

def _greedy_orderings(sk: Skeleton, rank: list[int]) -> list[list[int]]:
    """The greedy vertex-separation ordering from both ends of a pseudo-diameter, two tie-breaks each."""
    ends = [_pseudo_diameter(sk, comp, rank) for comp in _components(sk, rank)]
    runs = []
    for side in (0, 1):
        starts = [pair[side] for pair in ends]
        for tiebreak in ("recent", "topological"):
            runs.append(greedy_ordering(sk, starts, rank, tiebreak))
    return runs


def greedy_ordering(sk: Skeleton, starts: Sequence[int], rank: Sequence[int], tiebreak: str) -> list[int]:
    """Grow an ordering vertex by vertex, each time the frontier vertex that keeps the open set smallest.

    Parameters
    ----------
    sk : Skeleton
    starts : sequence of int
        One start vertex per connected component, in the order the components are taken.
    rank : sequence of int
        Each vertex's topological position (a tie-break).
    tiebreak : {"recent", "topological"}
        Among equal keys, the vertex touched most recently (a depth-first sweep) or the earliest in
        topological order.

    Notes
    -----
    The open set is the placed vertices with an unplaced neighbour. Placing v changes its size by
    ``[v has unplaced neighbours] - #(open vertices whose last unplaced neighbour is v)``; the key
    is that change, then v's number of unplaced neighbours. Each placement updates its neighbours'
    keys in a heap, O(m log n) in all.
    """
    n = len(sk)
    nbrs = sk.neighbours
    placed = bytearray(n)
    unplaced = [len(a) for a in nbrs]
    closes = [0] * n
    key: list[tuple | None] = [None] * n
    heap: list[tuple[tuple, int]] = []
    counter = itertools.count()

    def push(v: int) -> None:
        tie = -next(counter) if tiebreak == "recent" else rank[v]
        key[v] = ((unplaced[v] > 0) - closes[v], unplaced[v], tie)
        heapq.heappush(heap, (key[v], v))

    def last_unplaced(w: int) -> int:
        return next(x for x in nbrs[w] if not placed[x])

    order: list[int] = []
    pending_starts = list(starts)
    while len(order) < n:
        v = -1
        while heap:
            k, u = heapq.heappop(heap)
            if not placed[u] and key[u] == k:
                v = u
                break
        if v < 0:
            while placed[pending_starts[0]]:
                pending_starts.pop(0)
            v = pending_starts.pop(0)
        placed[v] = 1
        order.append(v)
        for w in nbrs[v]:
            unplaced[w] -= 1
            if not placed[w]:
                push(w)
            elif unplaced[w] == 1:
                x = last_unplaced(w)
                closes[x] += 1
                push(x)
        if unplaced[v] == 1:
            x = last_unplaced(v)
            closes[x] += 1
            push(x)
    return order


def _components(sk: Skeleton, rank: list[int]) -> list[list[int]]:
    seen = bytearray(len(sk))
    comps = []
    for s in sorted(range(len(sk)), key=rank.__getitem__):
        if seen[s]:
            continue
        seen[s] = 1
        comp, frontier = [s], [s]
        while frontier:
            nxt = []
            for v in frontier:
                for w in sk.neighbours[v]:
                    if not seen[w]:
                        seen[w] = 1
                        nxt.append(w)
            comp += nxt
            frontier = nxt
        comps.append(comp)
    return comps


def _pseudo_diameter(sk: Skeleton, comp: list[int], rank: list[int]) -> tuple[int, int]:
    """Two far-apart vertices of a component: repeated breadth-first search from the last one found."""
    start = min(comp, key=lambda v: (len(sk.neighbours[v]), rank[v]))
    far = _farthest(sk, start, rank)
    other = _farthest(sk, far, rank)
    return far, other


def _farthest(sk: Skeleton, start: int, rank: list[int]) -> int:
    """A vertex of the last breadth-first layer from ``start`` (smallest degree, then earliest)."""
    seen = {start}
    frontier = [start]
    while True:
        layer = []
        for v in frontier:
            for w in sk.neighbours[v]:
                if w not in seen:
                    seen.add(w)
                    layer.append(w)
        if not layer:
            return min(frontier, key=lambda v: (len(sk.neighbours[v]), rank[v]))
        frontier = layer


def tree_ordering(sk: Skeleton, bags: list[list[int]], edges: Sequence[tuple[int, int]],
                  rank: Sequence[int]) -> list[int]:
    """Vertices in the order a depth-first walk of a tree decomposition meets them, largest child last.

    Visiting the largest child subtree last keeps at most log2(N) "light" steps on any root path,
    and only bags above a light step can keep vertices open: hence the (tw+1)(log2 N + 1) bound.
    """
    if not bags:
        return []
    adjacency: list[list[int]] = [[] for _ in bags]
    for a, b in edges:
        adjacency[a].append(b)
        adjacency[b].append(a)
    parent = [-1] * len(bags)
    walk = [0]
    parent[0] = 0
    for a in walk:
        for b in adjacency[a]:
            if parent[b] == -1:
                parent[b] = a
                walk.append(b)
    size = [1] * len(bags)
    for a in reversed(walk[1:]):
        size[parent[a]] += size[a]
    children = [[] for _ in bags]
    for a in walk[1:]:
        children[parent[a]].append(a)
    emitted = bytearray(len(sk))
    order: list[int] = []
    stack = [0]
    while stack:
        a = stack.pop()
        for v in sorted(bags[a], key=rank.__getitem__):
            if not emitted[v]:
                emitted[v] = 1
                order.append(v)
        stack.extend(sorted(children[a], key=size.__getitem__, reverse=True))
    order += [v for v in range(len(sk)) if not emitted[v]]
    return order


# -- improving an ordering -------------------------------------------------------------------------

def local_search(profile: OrderingProfile, order: list[int], attempts: int, rng: random.Random) -> list[int]:
    """Move vertices of the widest bags next to a neighbour while that lowers the objective.

    Each attempt picks a widest bag, a vertex u in it and a neighbour w of u, and tries four moves:
    u just before or after w, w just before or after u. The best of them is kept if it is better
    than the current ordering (lexicographic (width, widest bags, total size)).
    """
    current = np.asarray(order, dtype=np.int64)
    if profile.size < 3 or not len(profile.neighbour):
        return list(order)
    sizes = profile.sizes(current)
    best = _objective(sizes)
    ptr = profile.neighbour_ptr
    for _ in range(min(attempts, 10 * profile.size)):
        pos, last = profile.spans(current)
        widest = np.flatnonzero(sizes == sizes.max())
        at = int(widest[rng.randrange(len(widest))])
        members = np.flatnonzero((pos <= at) & (last >= at))
        u = int(members[rng.randrange(len(members))])
        if ptr[u] == ptr[u + 1]:
            continue
        w = int(profile.neighbour[rng.randrange(int(ptr[u]), int(ptr[u + 1]))])
        improved = None
        for mover, anchor, after in ((u, w, False), (u, w, True), (w, u, False), (w, u, True)):
            trial = _moved(current, int(pos[mover]), int(pos[anchor]), after)
            trial_sizes = profile.sizes(trial)
            score = _objective(trial_sizes)
            if score < best:
                best, improved = score, (trial, trial_sizes)
        if improved is not None:
            current, sizes = improved
    return current.tolist()


def _moved(order: np.ndarray, src: int, anchor: int, after: bool) -> np.ndarray:
    """``order`` with the element at ``src`` moved just before (or after) the element at ``anchor``."""
    item = order[src]
    rest = np.delete(order, src)
    target = anchor - (1 if anchor > src else 0) + (1 if after else 0)
    return np.insert(rest, target, item)
