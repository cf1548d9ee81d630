"""Exact treewidth for small skeletons: a search over elimination orderings, memoised on vertex sets.

For each k from a lower bound up, :func:`_decide` asks "is there an elimination ordering in which
every vertex has at most k neighbours when it goes?" (that is: treewidth <= k). The state of the
search is the set of vertices still present (the elimination graph depends only on that set, not
on the order the others went in), so a failed set is remembered and never searched again. Two
safe rules cut the branching: a simplicial or almost simplicial vertex of degree <= k can always go
first; and a state whose degeneracy exceeds k cannot succeed. The first k that succeeds is the
treewidth; its ordering gives the decomposition.
"""

from __future__ import annotations

from ..errors import DecompositionError
from ._skeleton import Skeleton

EXACT_MAX_VERTICES = 40
"""Largest skeleton (non-pinned nodes) the exact method accepts."""

EXACT_MAX_STATES = 400_000
"""Search states the exact method may visit before it gives up (with a clear error)."""


def exact_tree_decomposition(sk: Skeleton, max_states: int = EXACT_MAX_STATES):
    """A minimum-width tree decomposition of the skeleton, as local bags and tree edges.

    Returns
    -------
    bags, edges, info
        ``info`` holds ``treewidth``, the ``lower_bound`` the search started from and the number of
        ``states`` it visited.

    Raises
    ------
    DecompositionError
        Above :data:`EXACT_MAX_VERTICES` vertices, or after ``max_states`` search states.

    Notes
    -----
    Worst case exponential (it is an NP-hard problem); on graphs of small width the memo and the
    reduction rules keep it to seconds at 40 vertices. Connected components are solved apart.

    References
    ----------
    H. L. Bodlaender, F. V. Fomin, A. M. C. A. Koster, D. Kratsch, D. M. Thilikos, "On exact
    algorithms for treewidth", ACM Transactions on Algorithms 9(1), 2012 (the set-based recurrence);
    V. Gogate and R. Dechter, "A complete anytime algorithm for treewidth", UAI 2004 (branch and
    bound over elimination orderings with simplicial rules).
    """
    n = len(sk)
    if n > EXACT_MAX_VERTICES:
        raise DecompositionError(f"exact treewidth is limited to {EXACT_MAX_VERTICES} non-pinned nodes; this graph "
                                 f"has {n}. Use heuristic='min_fill' (narrower) or 'min_degree' (faster) instead")
    adjacency = [_mask(nbrs) for nbrs in sk.neighbours]
    search = _Search(adjacency, max_states)
    order: list[int] = []
    width, lower = 0, 0
    for component in _components(adjacency, n):
        w, comp_lower, comp_order = search.solve_component(component)
        width, lower = max(width, w), max(lower, comp_lower)
        order += comp_order
    bags, edges = elimination_decomposition([set(nbrs) for nbrs in sk.neighbours], order)
    return bags, edges, {"treewidth": width, "lower_bound": lower, "states": search.states}


def _mask(vertices) -> int:
    m = 0
    for v in vertices:
        m |= 1 << v
    return m


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _components(adjacency: list[int], n: int) -> list[int]:
    left = (1 << n) - 1
    found = []
    while left:
        start = left & -left
        comp, frontier = start, start
        while frontier:
            grow = 0
            for v in _bits(frontier):
                grow |= adjacency[v]
            frontier = grow & ~comp
            comp |= frontier
        found.append(comp)
        left &= ~comp
    return found


def _eliminate(adjacency: list[int], v: int) -> list[int]:
    """The elimination graph after removing v: its neighbours become a clique."""
    out = list(adjacency)
    nv = adjacency[v]
    for u in _bits(nv):
        out[u] = (out[u] | nv) & ~((1 << u) | (1 << v))
    return out


def _is_clique(adjacency: list[int], mask: int) -> bool:
    return all((adjacency[u] | (1 << u)) & mask == mask for u in _bits(mask))


def _is_almost_simplicial(adjacency: list[int], mask: int) -> bool:
    """Some neighbour u such that the other neighbours form a clique (simplicial included)."""
    bad = [u for u in _bits(mask) if (adjacency[u] | (1 << u)) & mask != mask]
    if not bad:
        return True
    return any(_is_clique(adjacency, mask & ~(1 << u)) for u in bad)


def _degeneracy(adjacency: list[int], remaining: int) -> int:
    """Largest minimum degree met while deleting minimum-degree vertices: a treewidth lower bound."""
    adj = {v: adjacency[v] & remaining for v in _bits(remaining)}
    best = 0
    while adj:
        v = min(adj, key=lambda u: adj[u].bit_count())
        best = max(best, adj[v].bit_count())
        for u in _bits(adj.pop(v)):
            adj[u] &= ~(1 << v)
    return best


def _minor_min_width(adjacency: list[int], remaining: int) -> int:
    """Contraction degeneracy (contract a min-degree vertex into its min-degree neighbour): a lower bound."""
    adj = {v: adjacency[v] & remaining for v in _bits(remaining)}
    best = 0
    while len(adj) > 1:
        v = min(adj, key=lambda u: adj[u].bit_count())
        best = max(best, adj[v].bit_count())
        nv = adj.pop(v)
        if not nv:
            continue
        u = min(_bits(nv), key=lambda w: adj[w].bit_count())
        merged = (adj[u] | nv) & ~((1 << u) | (1 << v))
        for w in _bits(nv):
            adj[w] &= ~(1 << v)
        for w in _bits(merged):
            adj[w] |= 1 << u
        adj[u] = merged
    return best


def _min_fill_order(adjacency: list[int], remaining: int) -> tuple[int, list[int]]:
    """Greedy min-fill elimination ordering of ``remaining`` and its width: the starting upper bound."""
    adj = [a & remaining for a in adjacency]
    order, width = [], 0
    while remaining:
        v = _min_fill_vertex(adj, remaining)
        width = max(width, adj[v].bit_count())
        adj = _eliminate(adj, v)
        remaining &= ~(1 << v)
        order.append(v)
    return width, order


def _min_fill_vertex(adjacency: list[int], remaining: int) -> int:
    return min(_bits(remaining), key=lambda v: (_fill_in(adjacency, v), adjacency[v].bit_count()))


class _Search:
    """The decision search, with one state counter across every k tried."""

    def __init__(self, adjacency: list[int], max_states: int):
        self.adjacency = adjacency
        self.max_states = max_states
        self.states = 0

    def solve_component(self, component: int) -> tuple[int, int, list[int]]:
        adjacency = [a & component for a in self.adjacency]
        lower = max(_minor_min_width(adjacency, component), _degeneracy(adjacency, component))
        upper, order = _min_fill_order(adjacency, component)
        for k in range(lower, upper):
            found = self._decide(adjacency, component, k)
            if found is not None:
                return k, lower, found
        return upper, lower, order

    def _decide(self, adjacency: list[int], component: int, k: int) -> list[int] | None:
        failed: set[int] = set()

        def search(remaining: int, adj: list[int]) -> list[int] | None:
            if remaining.bit_count() <= k + 1:
                return list(_bits(remaining))
            if remaining in failed:
                return None
            self.states += 1
            if self.states > self.max_states:
                raise DecompositionError(f"exact treewidth gave up after {self.max_states:,} search states (deciding "
                                         f"width {k} on a component of {component.bit_count()} vertices); use "
                                         f"heuristic='min_fill' instead")
            candidates = [v for v in _bits(remaining) if adj[v].bit_count() <= k]
            for v in candidates:
                if _is_almost_simplicial(adj, adj[v]):
                    rest = search(remaining & ~(1 << v), _eliminate(adj, v))
                    if rest is None:
                        failed.add(remaining)
                        return None
                    return [v] + rest
            if not candidates or _minor_min_width(adj, remaining) > k:
                failed.add(remaining)
                return None
            candidates.sort(key=lambda v: (_fill_in(adj, v), adj[v].bit_count()))
            for v in candidates:
                rest = search(remaining & ~(1 << v), _eliminate(adj, v))
                if rest is not None:
                    return [v] + rest
            failed.add(remaining)
            return None

        return search(component, adjacency)


def _fill_in(adjacency: list[int], v: int) -> int:
    nv = adjacency[v]
    return sum((nv & ~adjacency[u] & ~(1 << u)).bit_count() for u in _bits(nv)) // 2


def elimination_decomposition(neighbours: list[set[int]] | tuple, order: list[int]) -> tuple[list[frozenset[int]],
                                                                                           list[tuple[int, int]]]:
    """The tree decomposition of an elimination ordering (fill edges added as vertices go).

    Bag i is ``{order[i]}`` plus its neighbours when it is eliminated; it hangs under the bag of
    the first of those neighbours to be eliminated later (or under the next bag when it has none,
    which keeps the bags one tree without breaking any vertex's connectivity).
    """
    position = {v: i for i, v in enumerate(order)}
    adjacency = [set(n) for n in neighbours]
    bags: list[frozenset[int]] = []
    edges: list[tuple[int, int]] = []
    for i, v in enumerate(order):
        nbrs = adjacency[v]
        bags.append(frozenset(nbrs | {v}))
        for u in nbrs:
            adjacency[u] |= nbrs
            adjacency[u].discard(u)
            adjacency[u].discard(v)
        if i + 1 < len(order):
            edges.append((i, min((position[u] for u in nbrs), default=i + 1)))
    return bags, edges
