"""``griewank``: binomial checkpointing, revolve (Griewank and Walther, 2000).

To run the backward steps of ``l`` forward steps in reverse with ``c`` checkpoint slots, revolve
advances ``m`` steps from the current checkpoint, stores a checkpoint there, reverses the last
``l - m`` steps with ``c - 1`` slots and then the first ``m`` with ``c``. With ``m`` chosen by the
binomial rule the number of forward steps is the least possible,

    t(l, c) = r * l - binom(c + r, r - 1),  r the least integer with binom(c + r, c) >= l,

for a chain of equal steps (Griewank 1992; Griewank and Walther 2000): :func:`revolve_plan` is
that textbook schedule and :func:`forward_steps` the formula.

On a graph the steps are the links of :mod:`.chain`, every link counting as one step whatever
its cost (revolve's objective is the number of forward steps). How many slots a sub-chain has
depends on the memory left to it: the gradients held during the backward pass are larger than
during the first forward sweep, and a graph's links differ in size. So the solver does not fix
``c``: it runs the plan table of :mod:`.plan_table` with unit step costs, allowing only the binomial
splits (those optimal for some slot count), and lets each sub-chain take the one its memory
affords. With uniform memory this is revolve exactly; it is optimal for chains of unit-cost steps.

References
----------
Griewank, Walther, "Algorithm 799: revolve: an implementation of checkpointing for the reverse or
adjoint mode of computational differentiation", ACM TOMS 26(1), 2000.
Griewank, "Achieving logarithmic growth of temporal and spatial complexity in reverse automatic
differentiation", Optimization Methods and Software 1, 1992.
"""

from __future__ import annotations

from functools import lru_cache
from math import comb

from ...graph import ComputeGraph
from ...schedule import Schedule
from ..registry import SolverTags, register
from .plan_table import TABLE_OPTIONS, solve_with_table
from .plans import SEGMENTATION_OPTION, Leaf, Plan, Split


def repetition_number(steps: int, slots: int) -> int:
    """The least ``r`` with ``binom(slots + r, slots) >= steps``: how often the busiest step is computed."""
    r = 0
    while comb(slots + r, slots) < steps:
        r += 1
    return r


def forward_steps(steps: int, slots: int) -> int:
    """Griewank's minimum number of forward steps to reverse ``steps`` steps with ``slots`` checkpoints.

    ``r * l - binom(c + r, r - 1)`` with ``r`` the repetition number: every forward step is counted,
    the first sweep included; the step reversed last (a link's own backward) is not.
    """
    if steps < 1 or slots < 1:
        raise ValueError(f"forward_steps needs steps >= 1 and slots >= 1, got steps={steps}, slots={slots}")
    r = repetition_number(steps, slots)
    return r * steps - comb(slots + r, r - 1) if r >= 1 else 0


def _beta(slots: int, r: int) -> int:
    return comb(slots + r, slots) if r >= 0 else 0


def optimal_splits(steps: int, slots: int) -> range:
    """The advance lengths ``m`` that are optimal for revolve with ``slots`` slots over ``steps`` steps.

    ``max(beta(c, r-2), l - beta(c-1, r)) <= m <= min(beta(c, r-1), l - beta(c-1, r-1))`` with
    ``beta(c, r) = binom(c + r, c)`` and ``r`` the repetition number (Griewank and Walther, 2000).
    """
    if steps < 2 or slots < 1:
        raise ValueError(f"optimal_splits needs steps >= 2 and slots >= 1, got steps={steps}, slots={slots}")
    r = repetition_number(steps, slots)
    low = max(_beta(slots, r - 2), steps - _beta(slots - 1, r), 1)
    high = min(_beta(slots, r - 1), steps - _beta(slots - 1, r - 1), steps - 1)
    return range(low, high + 1)


@lru_cache(maxsize=4096)
def binomial_splits(steps: int) -> tuple[int, ...]:
    """Every advance length that is an optimal revolve split for some slot count (``steps >= 2``)."""
    return tuple(sorted({m for c in range(1, steps) for m in optimal_splits(steps, c)}))


def revolve_plan(s: int, t: int, slots: int) -> Plan:
    """The revolve plan over links ``s..t`` with ``slots`` checkpoints (one slot holds a checkpoint).

    Raises
    ------
    ValueError
        If there is more than one link and no slot (the reversal needs somewhere to stand).
    """
    if t > s and slots < 1:
        raise ValueError(f"reversing links {s}..{t} needs at least one checkpoint slot")
    # Build bottom-up with an explicit stack (chains can be long): ("build", s, t, c) or ("join", s, j).
    stack: list[tuple] = [("build", s, t, slots)]
    results: list[Plan] = []
    while stack:
        item = stack.pop()
        if item[0] == "join":
            _, a, j = item
            left = results.pop()
            right = results.pop()
            results.append(Split(a, j, right, left))
            continue
        _, a, b, c = item
        if a == b:
            results.append(Leaf(b))
            continue
        m = optimal_splits(b - a + 1, c)[-1]
        j = a + m - 1
        stack.append(("join", a, j))
        stack.append(("build", a, j, c))        # left, built second -> popped from results first
        stack.append(("build", j + 1, b, c - 1))  # right
    return results[0]


@register("griewank", "Binomial checkpointing (revolve) over the link chain: binomial splits, each sub-chain with "
                      "the checkpoint slots its memory affords; optimal for chains of unit-cost steps.",
          tags=SolverTags(quick=True),
          options=(SEGMENTATION_OPTION, *TABLE_OPTIONS), reference="Griewank, Walther, Algorithm 799: revolve, ACM TOMS 26(1), 2000")
def griewank(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, segmentation: str = "auto",
             max_links: int = 64, memory_slots: int = 400) -> Schedule:
    """Revolve on the link chain: the fewest forward steps with binomial splits, within the budget.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Ignored: the table is filled in full.
    segmentation : {"auto", "articulation", "linear"}
        How link boundaries are found (:func:`.chain.chains`; "auto" tries both).
    max_links : int
        Links beyond this many are merged.
    memory_slots : int
        Memory levels of the table.

    Returns
    -------
    Schedule
        Checkpoint-all when it fits; else the plan with the fewest link computations whose
        splits are binomial. ``solver_info["predicted"]`` is that number of forward steps.

    Raises
    ------
    InfeasibleBudget
        When no plan fits (the smallest measured peak is reported).

    References
    ----------
    Griewank, Walther, "Algorithm 799: revolve", ACM TOMS 26(1), 2000.
    """
    del time_limit
    return solve_with_table(graph, budget, "griewank", segmentation=segmentation, max_links=max_links,
                            memory_slots=memory_slots, unit_steps=True, split_sizes=binomial_splits,
                            merge_tail=True)
