"""Checkmate's R/S/FREE/U model, built once for both the MILP and its LP relaxation (HiGHS).

Variables, over the :class:`~remat_core.solvers.stage_models.grid.StageGrid` of a fixed topological order
(``t`` a stage, ``i``/``k`` positions, ``M_i`` bytes, ``C_i`` cost):

- ``R[t, i]``: position ``i`` is computed in stage ``t`` (``i <= t``; ``R[t, t] = 1``: the frontier
  advances one node per stage).
- ``S[t, i]``: position ``i`` is kept in memory from stage ``t - 1`` into stage ``t`` (``i < t``).
- ``FREE[t, i, k]``: ``i`` (``k`` itself or one of ``k``'s predecessors) is freed right after
  ``k`` is computed in stage ``t``.
- ``U[t, k]``: memory right after ``k`` is computed in stage ``t``, before the frees that follow
  it; pinned memory is a constant taken off the budget.

Constraints (Jain et al. 2020, eqs. 1-7)::

    min  sum_t sum_i C_i R[t, i]
    R[t, k] <= R[t, i] + S[t, i]          for each edge i -> k   (inputs resident or recomputed)
    S[t+1, i] <= R[t, i] + S[t, i]                                (only what exists can be kept)
    U[t, 0] = M_0 R[t, 0] + sum_i M_i S[t, i]
    U[t, k] = U[t, k-1] + M_k R[t, k] - sum_{i in preds(k-1) + {k-1}} M_i FREE[t, i, k-1]
    U[t, k] <= budget - pinned bytes
    FREE[t, i, k] <= R[t, k]
    FREE[t, i, k] <= 1 - S[t+1, i]
    FREE[t, i, k] <= 1 - R[t, j]          for each j in succs(i) with k < j <= t

The FREE rows say that ``FREE[t, i, k] = R[t, k] (1 - S[t+1, i]) prod_j (1 - R[t, j])`` can only
be 1 when ``k`` is the last reader of ``i`` in stage ``t`` and ``i`` is not kept. Checkmate
linearises the product with one aggregated row (``num_hazards``); one row per factor, as here,
admits the same 0/1 points and a tighter LP relaxation, and it is what lets FREE be continuous
(below). Freeing is always good for memory, so the lower bounds on FREE that Checkmate adds to
force it to 1 are left out: they change no optimum.

Only ``R`` is declared integral in the MILP. Given a 0/1 ``R``, every feasible ``S`` is at least
the minimal one (keep exactly what a later stage reads) and every feasible ``FREE`` at most the
product above, so ``U`` is at least the memory of the free-after-last-reader schedule; that
schedule's own ``S`` and ``FREE`` are 0/1 and feasible. The set of feasible ``R`` and the optimum
are the same as with all three binary, with a fraction of the integer variables.

Two reductions keep the model small: ``R[t, i]`` and ``S[t, i]`` exist only for
``t <= last_useful_stage[i]`` (after it nothing ``i`` feeds is computed for the first time), and
``U``/``FREE`` only for positions ``k <= t``.

With a transfer lane (POET's paging variables, Rockmate's lane timing; ``link``): binaries ``OUT[t, i]``
(copy ``i``, resident when stage ``t`` starts, to the host during it), ``IN[t, i]`` (copy it back at the start
of stage ``t`` for the stage's own computes: they wait for it) and ``LATER[t, i]`` (copy it back at the start
of stage ``t`` for later stages: it runs beside the stage's computes), ``H[t, i]`` (a host copy exists when
stage ``t`` starts) and a stage time ``T[t]``::

    min  sum_t T[t]  (+ a tie-breaking 1e-6 per copy)
    T[t] >= sum_i C_i R[t, i] + sum_i d_in(i) IN[t, i]
    T[t] >= sum_i d_out(i) OUT[t, i];  T[t] >= sum_i d_in(i) (IN[t, i] + LATER[t, i])
    (one lane for both ways: T[t] >= the two copy sums together)
    OUT[t, i] <= S[t, i];  H[t+1, i] <= H[t, i] + OUT[t, i];  IN[t, i] + LATER[t, i] <= H[t, i]
    IN[t, i] + LATER[t, i] + S[t, i] <= 1;  IN[t, i] + LATER[t, i] + R[t, i] <= 1
    R[t, k] <= R[t, i] + S[t, i] + IN[t, i];  S[t+1, i] <= R[t, i] + S[t, i] + IN[t, i] + LATER[t, i]
    FREE[t, i, k] <= 1 - OUT[t, i]         (an offloaded tensor stays until its stage ends)
    U[t, 0] counts M_i (IN[t, i] + LATER[t, i])   (a prefetch holds its bytes from the stage's start)

Lanes that overlap only within a stage make the stage time a model: every schedule is timed again by the
simulator. Without a link the model is Checkmate's, unchanged.

Memory is expressed in units of the gcd of the node sizes, or of ``max(M) / 2**20`` when the gcd
is finer (coefficients stay below about a million), and the budget gets half a gcd of slack so
solver tolerances cannot cut off a schedule that fits exactly. Every schedule taken from the model
is still checked by the simulator before it is returned.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ...errors import SolverOptionError
from ...schedule import OFFLOAD, PREFETCH, Link
from ..deadline import Deadline
from .grid import StageCompute, StageGrid, stage_matrices

_UNIT_RANGE = 2 ** 20
TRANSFER_TIE = 1e-6
"""Per copy, this share of the largest op's cost is added to the objective: of two schedules as fast, the one
that copies less."""


def check_model_size(grid: StageGrid, max_nodes: int, who: str) -> None:
    """:class:`SolverOptionError` when the graph has more nodes to compute than ``max_nodes``."""
    if grid.n > max_nodes:
        raise SolverOptionError(
            f"{who}: the graph has {grid.n} nodes to compute; Checkmate's model has O(n^2) variables and is only "
            f"built up to max_nodes={max_nodes}. Raise max_nodes to try anyway, or use 'moccasin' (O(n) "
            f"variables) or a heuristic solver")


@dataclass(frozen=True)
class MemoryUnits:
    """How bytes become model units: ``units = bytes / unit``; every size is a multiple of ``gcd``."""

    unit: float
    gcd: int

    def budget(self, free_budget: int) -> float:
        """The budget in units, with half a gcd of slack.

        Every schedule's memory is a multiple of the gcd, so the slack admits no schedule over
        the budget, while solver tolerances can no longer cut off one that fits exactly.
        """
        return (math.floor(free_budget / self.gcd) + 0.5) * self.gcd / self.unit


def memory_units(mem: np.ndarray) -> MemoryUnits:
    """Units of the gcd of the sizes, or of ``max(mem) / 2**20`` when the gcd is finer than that."""
    nonzero = mem[mem > 0]
    if nonzero.size == 0:
        return MemoryUnits(1.0, 1)
    gcd = int(np.gcd.reduce(nonzero))
    return MemoryUnits(max(float(gcd), float(nonzero.max()) / _UNIT_RANGE), gcd)


@dataclass(frozen=True)
class ModelSize:
    """Variables, integer variables, constraints and nonzeros of a built model."""

    variables: int
    integers: int
    constraints: int
    nonzeros: int

    def as_dict(self) -> dict[str, int]:
        return {"variables": self.variables, "integer_variables": self.integers, "constraints": self.constraints,
                "nonzeros": self.nonzeros}


@dataclass(frozen=True)
class ModelSolution:
    """What HiGHS returned.

    Attributes
    ----------
    status : str
        ``optimal``, ``time_limit``, ``infeasible`` or another HiGHS model status (lower case).
    objective : float or None
        Cost of the best solution found (None: none found).
    bound : float or None
        A proven lower bound on the optimum: the MILP dual bound, or the LP optimum itself.
    gap : float or None
        Relative MIP gap ``(objective - bound) / objective`` (None for an LP or without a solution).
    r : numpy.ndarray or None
        The ``R`` values of the best solution (``n x n``, zeros where no variable exists).
    s : numpy.ndarray or None
        The ``S`` values likewise.
    out, into : numpy.ndarray or None
        With a transfer lane, the ``OUT`` values likewise, and the prefetches (``IN + LATER``); None without one.
    seconds : float
        HiGHS's run time.
    incumbents : tuple of (float, float)
        ``(seconds into the run, objective)`` of each improving MILP solution, the start included.
    """

    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    r: np.ndarray | None
    s: np.ndarray | None
    seconds: float
    incumbents: tuple[tuple[float, float], ...] = ()
    out: np.ndarray | None = None
    into: np.ndarray | None = None


class CheckmateModel:
    """Checkmate's model for one graph and budget, ready to solve as a MILP or an LP.

    Parameters
    ----------
    grid : StageGrid
    free_budget : int
        Budget in bytes minus the pinned bytes.
    integral : bool
        True for the MILP (``R`` binary), False for the LP relaxation.
    deadline : Deadline, optional
        Building stops with :class:`~remat_core.solvers.deadline.TimeUp` once it passes (building
        takes seconds at a few hundred stages).
    memory_stages : iterable of int, optional
        The stages whose memory is modelled (``FREE``, ``U`` and the budget rows); default all.
        Leaving stages out relaxes the problem: its optimum is a lower bound, and it is the
        optimum when its schedule fits the budget in every stage (:func:`fixed_order_milp` adds
        the stages a solution overflows until one fits).
    link : Link, optional
        A transfer lane: the model gains offload and prefetch decisions and minimises the stages'
        time (see the module notes).
    """

    def __init__(self, grid: StageGrid, free_budget: int, integral: bool, deadline: Deadline | None = None,
                 memory_stages: Iterable[int] | None = None, link: Link | None = None):
        self.grid = grid
        self.link = link
        self.integral = integral
        self._deadline = deadline or Deadline(None)
        self.memory_stages = frozenset(range(grid.n) if memory_stages is None else memory_stages)
        self.units = memory_units(grid.mem)
        self.budget_units = self.units.budget(free_budget)
        self._mem = grid.mem / self.units.unit
        self._index_columns()
        self._build_rows()

    # -- columns ------------------------------------------------------------------------------

    def _index_columns(self) -> None:
        grid, n = self.grid, self.grid.n
        useful = grid.last_useful_stage
        t_idx, i_idx = np.tril_indices(n)
        keep = t_idx <= useful[i_idx]
        r_t, r_i = t_idx[keep], i_idx[keep]
        s_keep = keep & (i_idx < t_idx)
        s_t, s_i = t_idx[s_keep], i_idx[s_keep]
        self.r_col = np.full((n, n), -1, dtype=np.int64)
        self.r_col[r_t, r_i] = np.arange(r_t.size)
        offset = r_t.size
        self.s_col = np.full((n, n), -1, dtype=np.int64)
        self.s_col[s_t, s_i] = offset + np.arange(s_t.size)
        offset += s_t.size
        free_t, free_i, free_k = [], [], []
        for t in sorted(self.memory_stages):
            for k in range(t + 1):
                if self.r_col[t, k] < 0:
                    continue
                for i in (*grid.preds[k], k):
                    free_t.append(t)
                    free_i.append(i)
                    free_k.append(k)
        self.free_t = np.array(free_t, dtype=np.int64)
        self.free_i = np.array(free_i, dtype=np.int64)
        self.free_k = np.array(free_k, dtype=np.int64)
        self.free_col0 = offset
        offset += self.free_t.size
        self.u_col = np.full((n, n), -1, dtype=np.int64)
        modelled = np.isin(t_idx, np.fromiter(self.memory_stages, dtype=np.int64))
        self.u_col[t_idx[modelled], i_idx[modelled]] = offset + np.arange(int(modelled.sum()))
        offset += int(modelled.sum())
        # the transfer lane's columns, where a tensor can be kept (S's pattern)
        self.out_col = np.full((n, n), -1, dtype=np.int64)
        self.in_col = np.full((n, n), -1, dtype=np.int64)
        self.later_col = np.full((n, n), -1, dtype=np.int64)
        self.h_col = np.full((n, n), -1, dtype=np.int64)
        self.t_col = np.full(n, -1, dtype=np.int64)
        if self.link is not None:
            for matrix in (self.out_col, self.in_col, self.later_col, self.h_col):
                matrix[s_t, s_i] = offset + np.arange(s_t.size)
                offset += s_t.size
            self.t_col[:] = offset + np.arange(n)
            offset += n
        self.num_cols = offset
        self._r_cols = (r_t, r_i)
        self._s_cols = (s_t, s_i)

    # -- rows ---------------------------------------------------------------------------------

    def _build_rows(self) -> None:
        grid, n = self.grid, self.grid.n
        r_col, s_col, u_col, mem = self.r_col, self.s_col, self.u_col, self._mem
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        lower: list[float] = []
        upper: list[float] = []
        inf = math.inf

        def add_row(entries: Sequence[tuple[int, float]], lo: float, hi: float) -> None:
            row = len(lower)
            for c, v in entries:
                if c < 0:  # a column the model does not have (a transfer's, without a link)
                    continue
                rows.append(row)
                cols.append(c)
                vals.append(v)
            lower.append(lo)
            upper.append(hi)

        # inputs of every compute are resident (kept from before, or recomputed earlier this stage)
        for t in range(n):
            self._deadline.check()
            for k in range(t + 1):
                rk = r_col[t, k]
                if rk < 0:
                    continue
                for i in grid.preds[k]:
                    add_row(((rk, 1.0), (r_col[t, i], -1.0), (s_col[t, i], -1.0), (self.in_col[t, i], -1.0)),
                            -inf, 0.0)
        # a kept tensor existed in the previous stage
        s_t, s_i = self._s_cols
        for t, i in zip(s_t.tolist(), s_i.tolist()):
            entries = [(s_col[t, i], 1.0), (r_col[t - 1, i], -1.0)]
            if s_col[t - 1, i] >= 0:
                entries.append((s_col[t - 1, i], -1.0))
            if self.in_col[t - 1, i] >= 0:
                entries += [(self.in_col[t - 1, i], -1.0), (self.later_col[t - 1, i], -1.0)]
            add_row(entries, -inf, 0.0)
        # FREE[t, i, k] only when k is computed, i is not kept, and no later reader of i runs in stage t
        for f, (t, i, k) in enumerate(zip(self.free_t.tolist(), self.free_i.tolist(), self.free_k.tolist())):
            if f % 20000 == 0:
                self._deadline.check()
            fc = self.free_col0 + f
            add_row(((fc, 1.0), (r_col[t, k], -1.0)), -inf, 0.0)
            if self.out_col[t, i] >= 0:
                add_row(((fc, 1.0), (self.out_col[t, i], 1.0)), -inf, 1.0)
            if t + 1 < n and s_col[t + 1, i] >= 0:
                add_row(((fc, 1.0), (s_col[t + 1, i], 1.0)), -inf, 1.0)
            for j in grid.succs[i]:
                if k < j <= t and r_col[t, j] >= 0:
                    add_row(((fc, 1.0), (r_col[t, j], 1.0)), -inf, 1.0)
        # memory recurrence
        frees_after: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for f, (t, i, k) in enumerate(zip(self.free_t.tolist(), self.free_i.tolist(), self.free_k.tolist())):
            frees_after.setdefault((t, k), []).append((self.free_col0 + f, i))
        for t in sorted(self.memory_stages):
            self._deadline.check()
            entries = [(u_col[t, 0], 1.0)]
            if r_col[t, 0] >= 0:
                entries.append((r_col[t, 0], -float(mem[0])))
            entries += [(s_col[t, i], -float(mem[i])) for i in range(t) if s_col[t, i] >= 0 and mem[i] > 0]
            entries += [(c[t, i], -float(mem[i])) for c in (self.in_col, self.later_col) for i in range(t)
                        if c[t, i] >= 0 and mem[i] > 0]
            add_row(entries, 0.0, 0.0)
            for k in range(1, t + 1):
                entries = [(u_col[t, k], 1.0), (u_col[t, k - 1], -1.0)]
                if r_col[t, k] >= 0 and mem[k] > 0:
                    entries.append((r_col[t, k], -float(mem[k])))
                entries += [(fc, float(mem[i])) for fc, i in frees_after.get((t, k - 1), ()) if mem[i] > 0]
                add_row(entries, 0.0, 0.0)

        if self.link is not None:
            self._transfer_rows(add_row)

        import scipy.sparse  # loaded with the first model: importing remat_core stays quick
        matrix = scipy.sparse.csr_matrix((np.array(vals), (np.array(rows), np.array(cols))),
                                         shape=(len(lower), self.num_cols))
        self._matrix = matrix
        self._row_lower = np.array(lower)
        self._row_upper = np.array(upper)

    def _transfer_rows(self, add_row) -> None:
        """The transfer lane's rows (see the module notes)."""
        grid, n, link = self.grid, self.grid.n, self.link
        r_col, s_col, out_col, h_col = self.r_col, self.s_col, self.out_col, self.h_col
        in_col, later_col = self.in_col, self.later_col
        inf = math.inf
        s_t, s_i = self._s_cols
        for t, i in zip(s_t.tolist(), s_i.tolist()):
            back = ((in_col[t, i], 1.0), (later_col[t, i], 1.0))
            add_row(((out_col[t, i], 1.0), (s_col[t, i], -1.0)), -inf, 0.0)
            add_row((*back, (h_col[t, i], -1.0)), -inf, 0.0)
            add_row((*back, (s_col[t, i], 1.0)), -inf, 1.0)
            if r_col[t, i] >= 0:
                add_row((*back, (r_col[t, i], 1.0)), -inf, 1.0)
            entries = [(h_col[t, i], 1.0)]
            if h_col[t - 1, i] >= 0:
                entries += [(h_col[t - 1, i], -1.0), (out_col[t - 1, i], -1.0)]
            add_row(entries, -inf, 0.0)
        out_time = np.array([link.duration(OFFLOAD, int(m)) for m in grid.mem])
        in_time = np.array([link.duration(PREFETCH, int(m)) for m in grid.mem])
        for t in range(n):
            self._deadline.check()
            waited = [(in_col[t, i], float(in_time[i])) for i in range(t) if in_col[t, i] >= 0]
            compute = [(r_col[t, i], float(grid.cost[i])) for i in range(t + 1) if r_col[t, i] >= 0]
            add_row(compute + waited + [(self.t_col[t], -1.0)], -inf, 0.0)
            outs = [(out_col[t, i], float(out_time[i])) for i in range(t) if out_col[t, i] >= 0]
            ins = waited + [(later_col[t, i], float(in_time[i])) for i in range(t) if later_col[t, i] >= 0]
            lanes = [outs, ins] if link.full_duplex else [outs + ins]
            for lane in lanes:
                if lane:
                    add_row(lane + [(self.t_col[t], -1.0)], -inf, 0.0)

    def transfers(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``OUT`` and the prefetches ``IN + LATER`` (``n x n``) of a column vector of a model with a link."""
        out = np.zeros((self.grid.n, self.grid.n))
        into = np.zeros((self.grid.n, self.grid.n))
        out[self.out_col >= 0] = values[self.out_col[self.out_col >= 0]]
        into[self.in_col >= 0] = values[self.in_col[self.in_col >= 0]] + values[self.later_col[self.later_col >= 0]]
        return out, into

    # -- HiGHS -----------------------------------------------------------------------------------

    def size(self) -> ModelSize:
        """How big the model is."""
        return ModelSize(self.num_cols, self._r_cols[0].size if self.integral else 0, self._matrix.shape[0],
                         self._matrix.nnz)

    def column_upper(self) -> np.ndarray:
        """Each column's upper bound: 1, the budget for memory, none for a stage's time."""
        col_upper = np.ones(self.num_cols)
        col_upper[self.u_col[self.u_col >= 0]] = self.budget_units
        col_upper[self.t_col[self.t_col >= 0]] = math.inf
        return col_upper

    def _highs_lp(self):
        highspy = _highspy()
        n = self.grid.n
        r_t, r_i = self._r_cols
        cost = self._objective()
        col_lower = np.zeros(self.num_cols)
        col_upper = self.column_upper()
        diagonal = self.r_col[np.arange(n), np.arange(n)]
        col_lower[diagonal] = 1.0
        lp = highspy.HighsLp()
        lp.num_col_ = self.num_cols
        lp.num_row_ = self._matrix.shape[0]
        lp.col_cost_ = cost
        lp.col_lower_ = col_lower
        lp.col_upper_ = col_upper
        lp.row_lower_ = self._row_lower
        lp.row_upper_ = self._row_upper
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = self._matrix.indptr
        lp.a_matrix_.index_ = self._matrix.indices
        lp.a_matrix_.value_ = self._matrix.data
        lp.a_matrix_.num_col_ = self.num_cols
        lp.a_matrix_.num_row_ = self._matrix.shape[0]
        if self.integral:
            integrality = [highspy.HighsVarType.kContinuous] * self.num_cols
            for c in self.r_col[r_t, r_i].tolist():
                integrality[c] = highspy.HighsVarType.kInteger
            for matrix in (self.out_col, self.in_col, self.later_col):
                for c in matrix[matrix >= 0].tolist():
                    integrality[c] = highspy.HighsVarType.kInteger
            lp.integrality_ = integrality
        return lp

    def _objective(self) -> np.ndarray:
        """The cost vector: each computation's cost, or with a link each stage's time and a tie-breaker per copy."""
        cost = np.zeros(self.num_cols)
        if self.link is None:
            r_t, r_i = self._r_cols
            cost[self.r_col[r_t, r_i]] = self.grid.cost[r_i]
            return cost
        cost[self.t_col] = 1.0
        tie = TRANSFER_TIE * max(float(self.grid.cost.max(initial=0.0)), 1e-12)
        cost[self.out_col[self.out_col >= 0]] = tie
        cost[self.in_col[self.in_col >= 0]] = tie
        cost[self.later_col[self.later_col >= 0]] = tie
        return cost

    def start_vector(self, computes: Sequence[StageCompute]) -> np.ndarray:
        """A full solution vector for a stage-compute sequence (for a MIP start).

        ``R`` from the computes, the minimal ``S``, ``FREE`` as the exact product and ``U`` by the
        recurrence: the simulator's memory at every compute, in model units.
        """
        grid, n = self.grid, self.grid.n
        r, s = stage_matrices(grid, computes)
        x = np.zeros(self.num_cols)
        if np.any(r[self.r_col < 0]) or np.any(s[self.s_col < 0]):
            raise ValueError("the warm start computes or keeps a node after its last useful stage")
        x[self.r_col[self.r_col >= 0]] = r[self.r_col >= 0]
        x[self.s_col[self.s_col >= 0]] = s[self.s_col >= 0]
        free = np.zeros(self.free_t.size)
        for f, (t, i, k) in enumerate(zip(self.free_t.tolist(), self.free_i.tolist(), self.free_k.tolist())):
            kept = t + 1 < n and s[t + 1, i]
            later = any(r[t, j] for j in grid.succs[i] if k < j <= t)
            free[f] = 1.0 if (r[t, k] and not kept and not later) else 0.0
        x[self.free_col0: self.free_col0 + free.size] = free
        if self.link is not None:  # nothing copied: each stage takes its computations' time
            x[self.t_col] = r @ self.grid.cost
        freed = np.zeros((n, n))
        np.add.at(freed, (self.free_t, self.free_k), free * self._mem[self.free_i])
        for t in sorted(self.memory_stages):
            memory = float(self._mem[:t] @ s[t, :t])
            for k in range(t + 1):
                memory += self._mem[k] * r[t, k]
                x[self.u_col[t, k]] = memory
                memory -= freed[t, k]
        return x

    def solve(self, time_limit: float | None, mip_gap: float = 0.0,
              start: np.ndarray | None = None) -> ModelSolution:
        """Run HiGHS (MILP or LP) and read back the best solution and bound, within ``time_limit`` seconds.

        HiGHS checks its own time limit only now and then (in presolve and the root LP of a few
        hundred stages it was seen to run 50-100 % over), so it runs in a thread: at the limit it
        is asked to stop, and if it has not stopped a moment later it is left behind and the best
        solution its callback reported is used (:func:`run_highs`).

        HiGHS 1.16's MIP presolve was seen to misreport a MIP start: it claimed a lower objective
        (and a matching dual bound, so "optimal") than the columns it returned are worth. When the
        objective it reports disagrees with its own columns, the run is repeated without presolve,
        in the time that is left, and that answer is used.
        """
        highspy = _highspy()
        deadline = Deadline(time_limit)
        run = self._run(deadline, mip_gap, start, presolve=True)
        if self.integral and start is not None and run.finished and self._objective_disagrees(run.highs):
            if deadline.left() > 0.05:
                run = self._run(deadline, mip_gap, start, presolve=False)
        incumbents = tuple((seconds, value) for seconds, value, _ in run.improving)
        if not run.finished:  # left behind at the deadline: only what its callback reported
            if not run.improving:
                return ModelSolution("time_limit", None, None, None, None, None, run.seconds, incumbents)
            values = run.improving[-1][2]
            objective = self._worth(values)
            r, s = self._matrices(values)
            return ModelSolution("time_limit", objective, run.bound, relative_gap(objective, run.bound), r, s,
                                 run.seconds, incumbents, *self._transfer_values(values))
        h = run.highs
        status = h.modelStatusToString(h.getModelStatus()).lower().replace(" ", "_")
        if status in ("interrupted_by_user", "time_limit_reached"):  # stopped at our deadline, or at its own
            status = "time_limit"
        info = h.getInfo()
        has_solution = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
        if h.getModelStatus() == highspy.HighsModelStatus.kOptimal and not self.integral:
            has_solution = True
        if not has_solution:
            return ModelSolution(status, None, None, None, None, None, run.seconds, incumbents)
        values = np.asarray(h.getSolution().col_value)
        r, s = self._matrices(values)
        objective = self._worth(values)
        if self.integral:
            bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else None
            gap = relative_gap(objective, bound)
        else:
            optimal = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
            bound, gap = (objective if optimal else None), None
        return ModelSolution(status, objective, bound, gap, r, s, run.seconds, incumbents,
                             *self._transfer_values(values))

    def _transfer_values(self, values: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        return self.transfers(values) if self.link is not None else (None, None)

    def _matrices(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``R`` and ``S`` (``n x n``) of a column vector."""
        r = np.zeros((self.grid.n, self.grid.n))
        s = np.zeros((self.grid.n, self.grid.n))
        r[self.r_col >= 0] = values[self.r_col[self.r_col >= 0]]
        s[self.s_col >= 0] = values[self.s_col[self.s_col >= 0]]
        return r, s

    def _run(self, deadline: Deadline, mip_gap: float, start: np.ndarray | None, presolve: bool) -> "HighsRun":
        """One HiGHS run of this model until ``deadline`` (see :func:`run_highs`)."""
        highspy = _highspy()
        h = _new_highs()
        h.passModel(self._highs_lp())
        if not presolve:
            h.setOptionValue("presolve", "off")
        if self.integral:
            h.setOptionValue("mip_rel_gap", float(mip_gap))
        if start is not None:
            solution = highspy.HighsSolution()
            solution.col_value = start.tolist()
            solution.value_valid = True
            h.setSolution(solution)
        return run_highs(h, deadline, record_solutions=self.integral)

    def _worth(self, values: np.ndarray) -> float:
        """The objective of a column vector: the cost of every computation it makes (with a link, the stages'
        time and the copies' tie-breaker)."""
        return float(values @ self._objective())

    def _objective_disagrees(self, h) -> bool:
        """Whether the objective HiGHS reports is not what its returned columns cost."""
        highspy = _highspy()
        if h.getInfo().primal_solution_status != highspy.SolutionStatus.kSolutionStatusFeasible:
            return False
        worth = self._worth(np.asarray(h.getSolution().col_value))
        reported = float(h.getInfo().objective_function_value)
        return abs(worth - reported) > 1e-6 * max(1.0, abs(worth))

def relative_gap(objective: float, bound: float | None) -> float | None:
    """``(objective - bound) / objective``, 0 within 1e-9 relative, None without a bound."""
    if bound is None:
        return None
    difference = max(objective - bound, 0.0)
    if difference <= 1e-9 * max(1.0, abs(objective)):
        return 0.0
    return difference / abs(objective) if objective != 0 else math.inf


# -- HiGHS within a deadline -----------------------------------------------------------------------

_STOP_GRACE_SECONDS = 1.0
"""How long HiGHS gets to stop once asked before it is left behind."""

_LEFT_BEHIND: list[threading.Thread] = []


def highs_left_running() -> bool:
    """Whether a HiGHS run left behind at a deadline is still running (asked to stop, it ends at its next check).

    A process that exits then must not run C++ destructors under it (they abort): the command line
    ends with ``os._exit`` in that case, after flushing its output.
    """
    _LEFT_BEHIND[:] = [t for t in _LEFT_BEHIND if t.is_alive()]
    return bool(_LEFT_BEHIND)


@dataclass
class HighsRun:
    """One HiGHS run: the instance when it finished, else what its callbacks reported.

    Attributes
    ----------
    highs : highspy.Highs
        Safe to read only when ``finished``.
    finished : bool
        False: HiGHS was still running at the deadline and was left behind (its thread is a
        daemon, and it was asked to stop).
    improving : list of (float, float, numpy.ndarray)
        ``(seconds into the run, objective, column values)`` of each improving MIP solution.
    bound : float or None
        The last MIP dual bound a callback reported.
    seconds : float
    """

    highs: object
    finished: bool
    improving: list
    bound: float | None
    seconds: float


def run_highs(h, deadline: Deadline, record_solutions: bool) -> HighsRun:
    """Run ``h`` until ``deadline``, in a thread: asked to stop at the deadline, left behind if it does not.

    HiGHS's own ``time_limit`` is set too, but it is checked only now and then; its interrupt
    callbacks (``HandleUserInterrupt``) stop it at the next check, which in presolve or a large
    root LP can be seconds away. The process is never held up by more than
    :data:`_STOP_GRACE_SECONDS` past the deadline. Runs never overlap: a run left behind earlier is
    waited for first, within this deadline (HiGHS shares one task scheduler per process, and
    highspy's own ``startSolve`` shares one lock between all instances, so it is not used).
    """
    improving: list = []
    bound: list[float | None] = [None]
    started = time.perf_counter()
    for earlier in list(_LEFT_BEHIND):
        earlier.join(None if not deadline.limited else deadline.left())
    if highs_left_running():
        return HighsRun(h, False, improving, None, time.perf_counter() - started)
    if deadline.limited:
        h.setOptionValue("time_limit", float(max(deadline.left(), 0.01)))
    if record_solutions:
        def improved(event) -> None:
            out = event.data_out
            improving.append((float(out.running_time), float(out.objective_function_value),
                              np.array(out.mip_solution, dtype=float)))
            if math.isfinite(out.mip_dual_bound):
                bound[0] = float(out.mip_dual_bound)
        h.cbMipImprovingSolution.subscribe(improved)
    h.HandleUserInterrupt = True
    thread = threading.Thread(target=h.run, name="highs", daemon=True)
    thread.start()
    thread.join(None if not deadline.limited else deadline.left() + 0.05)
    if thread.is_alive():
        h.cancelSolve()
        thread.join(_STOP_GRACE_SECONDS)
    finished = not thread.is_alive()
    if not finished:
        _LEFT_BEHIND.append(thread)
    return HighsRun(h, finished, improving, bound[0], time.perf_counter() - started)


# -- HiGHS without its banner ----------------------------------------------------------------------

_BANNER_LOCK = threading.Lock()
_banner_printed = False


def _highspy():
    import highspy  # imported on first use: solving is the only reason to load HiGHS
    return highspy


def _new_highs():
    """A silent ``highspy.Highs``.

    HiGHS 1.16 writes a copyright banner to the C-level stdout when the first instance of a
    process is constructed, before any option can switch logging off; the CLI's ``--json`` output
    must stay clean, so that one construction runs with file descriptor 1 pointed at /dev/null.
    """
    global _banner_printed
    highspy = _highspy()
    with _BANNER_LOCK:
        if _banner_printed:
            h = highspy.Highs()
        else:
            sys.stdout.flush()
            saved = os.dup(1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 1)
                h = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
                os.close(devnull)
            _banner_printed = True
    h.setOptionValue("output_flag", False)
    return h
