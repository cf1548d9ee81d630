"""The separator recursion of ``treewidth`` and ``pathwidth`` recorded call by call, for teaching.

:func:`trace_recursion` runs the recursion of :mod:`.recursion` over the solver's own
decomposition, as the paper states it (no budget) or with the fits-budget rule (a budget), and
keeps every call ``remat(X, keep, touch)``: the separator bag X it works in, what its caller asked
for, the subgraph S it computes (with the calls it opens), its depth and parent, and which ops it
emitted. No post-pass and no fallback run, so the schedule is the recursion's own; like every
schedule it is measured by the simulator, never by the recursion (the Learn page simulates it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...decompose import Decomposition, SeparatorTree, path_decomposition, tree_decomposition
from ...graph import ComputeGraph
from ...schedule import Schedule
from ..registry import find_solvers
from .recursion import DEFAULT_MAX_COMPUTES, SeparatorRemat, decomposition_hierarchy, materialize_reasons

_DECOMPOSITIONS = {"treewidth": ("tree", "min_degree"), "pathwidth": ("path", "best")}
"""The decomposition (kind, default method) each solver tagged ``traceable_recursion`` recurses on."""


def recursion_decomposition(solver: str) -> str:
    """The kind of decomposition (``tree`` or ``path``) the traced recursion of ``solver`` works on."""
    return _DECOMPOSITIONS[solver][0]


@dataclass(frozen=True)
class RecursionCall:
    """One call ``remat(X, keep, touch)`` of the recursion.

    Attributes
    ----------
    index : int
        Its position in the order calls open (0: the top call).
    parent : int or None
        The call that opened it.
    children : tuple of int
        The calls it opened, in order.
    frame : int
        X: the decomposition bag (a node of the separator tree) the call works in.
    depth : int
        X's depth in the separator tree.
    rule : str
        ``separator-request``: it computes the bag's tensors of its subgraph itself and asks its
        children for their inputs; ``separator-leaf``: a leaf bag, whose subgraph it computes in
        topological order; ``fits-budget``: its subgraph fits the memory left, so it is computed
        in topological order without recursing.
    requester : int or None
        The separator bag whose request opened the call (None: the top call).
    consumer : str or None
        The tensor whose inputs the call brings in (None: the top call, or phase 2: the rest of
        what the caller asked for).
    keep : tuple of str
        Tensors the caller wants resident when the call returns.
    touch : tuple of str
        Outputs the caller wants computed at least once.
    subgraph : tuple of str
        S: every tensor the call (with the calls it opens) computes, in topological order: the
        not-resident ancestors of ``keep`` and ``touch``.
    bag : tuple of str
        The separator bag's tensors: resident while the call runs, once computed.
    targets : tuple of str
        The tensors the call computes itself, in order: S ∩ bag (separator-request), else S.
    first_op, end_op : int
        The call's ops, and those of the calls it opens, are ``ops[first_op:end_op]``.
    """

    index: int
    parent: int | None
    children: tuple[int, ...]
    frame: int
    depth: int
    rule: str
    requester: int | None
    consumer: str | None
    keep: tuple[str, ...]
    touch: tuple[str, ...]
    subgraph: tuple[str, ...]
    bag: tuple[str, ...]
    targets: tuple[str, ...]
    first_op: int
    end_op: int


@dataclass(frozen=True)
class RecursionTrace:
    """The recursion of one solver on one graph, call by call.

    Attributes
    ----------
    solver : str
    budget : int or None
        None: the paper's pure recursion; else the fits-budget rule at this budget (the schedule
        may still go over it: only the solver's post-passes and fallback make it fit).
    decomposition : Decomposition
    separators : SeparatorTree
        The tree the recursion walks: ``frame`` numbers are its bags.
    calls : tuple of RecursionCall
    op_calls : tuple of int
        Per op of ``schedule``, the call that emitted it.
    schedule : Schedule
        The recursion's ops; each reason carries ``call`` as well as the solver's usual fields. Not
        yet simulated.
    """

    solver: str
    budget: int | None
    decomposition: Decomposition
    separators: SeparatorTree
    calls: tuple[RecursionCall, ...]
    op_calls: tuple[int, ...]
    schedule: Schedule


def trace_recursion(graph: ComputeGraph, solver: str = "treewidth", budget: int | None = None, *,
                    method: str | None = None, max_computes: int = DEFAULT_MAX_COMPUTES) -> RecursionTrace:
    """Run ``solver``'s separator recursion on ``graph`` and keep every call.

    Parameters
    ----------
    graph : ComputeGraph
    solver : str
        A solver tagged ``traceable_recursion`` (``treewidth``, ``pathwidth``).
    budget : int, optional
        None: the pure recursion (``budget_aware=False``); else the fits-budget rule at this budget.
    method : str, optional
        The decomposition method: the tree heuristic for ``treewidth`` (default min_degree), the
        path method for ``pathwidth`` (default best), as the solvers' own options.
    max_computes : int
        Stop with :class:`~remat_core.errors.SolverLimitExceeded` past this many compute ops.

    Raises
    ------
    ValueError
        For a solver whose tags do not say its recursion can be traced.
    SolverLimitExceeded
        When the recursion passes ``max_computes``.
    DecompositionError
        For a method that refuses the graph.
    """
    traceable = [spec.name for spec in find_solvers(traceable_recursion=True)]
    if solver not in traceable:
        raise ValueError(f"only the recursion of {', '.join(traceable)} can be traced, not {solver!r}")
    kind, default = _DECOMPOSITIONS[solver]
    build = tree_decomposition if kind == "tree" else path_decomposition
    decomposition = build(graph, method or default)
    separators, hierarchy = decomposition_hierarchy(graph, decomposition, solver)
    run = SeparatorRemat(graph, hierarchy, budget, max_computes, solver, record=True)
    ops, why = run.run()
    records = run.calls or []
    ids = graph.ids
    children: list[list[int]] = [[] for _ in records]
    for k, record in enumerate(records):
        if record.parent is not None:
            children[record.parent].append(k)
    calls = []
    for k, record in enumerate(records):
        bag = hierarchy.bag_sets[record.node]
        own = [v for v in record.closure if v in bag] if record.rule == "separator-request" else record.closure
        calls.append(RecursionCall(
            index=k, parent=record.parent, children=tuple(children[k]), frame=record.node, depth=record.depth,
            rule=record.rule, requester=record.requester,
            consumer=ids[record.consumer] if record.consumer is not None else None, keep=_names(ids, record.keep),
            touch=_names(ids, record.touch), subgraph=_names(ids, record.closure),
            bag=_names(ids, sorted(hierarchy.bags[record.node])), targets=_names(ids, own),
            first_op=record.first_op, end_op=record.end_op))
    reasons = materialize_reasons(graph, hierarchy, ops, why, run.op_calls)
    info: dict[str, Any] = {"decomposition": kind, "method": decomposition.method, "width": decomposition.width,
                            "bags": len(decomposition), "separator_height": hierarchy.height,
                            "strategy": "pure recursion" if budget is None else "recursion with the fits-budget rule"}
    schedule = Schedule.from_ops([(a, ids[v]) for a, v in ops], reasons, graph=graph.name, solver=solver,
                                 budget=budget, solver_info=info)
    return RecursionTrace(solver, budget, decomposition, separators, tuple(calls), tuple(run.op_calls), schedule)


def _names(ids, indices) -> tuple[str, ...]:
    return tuple(ids[v] for v in indices)
