"""Checkmate's stage model with a transfer lane, solved by HiGHS or CP-SAT, and its solution as ops.

The model is :class:`~.checkmate_model.CheckmateModel` given a link (its notes have the rows). Its solution
says, per stage, what is computed (``R``), copied out (``OUT``) and back (``IN``), all integral; what is kept
(``S``, continuous in the model, and free to be more than needed) is derived as the least the others need,
which holds no more memory than the model counted. The ops follow:
at the start of stage ``t`` the prefetches of ``IN[t]`` and the offloads of ``OUT[t]``, then the stage's
computes in order, each tensor freed after its last reader of the stage unless the next stage keeps it or
it is being offloaded; at the stage's end whatever the next stage does not keep is freed (an offloaded
tensor waits there for its copy). The simulator times the result over the link.

:func:`faster_with_offloads` is what ``checkmate-milp`` (HiGHS) and ``moccasin`` (CP-SAT, the same rows with
integer coefficients: memory in units of the sizes' gcd, times scaled and rounded up) do with a link: solve the
model from their recompute-only schedule and keep whichever the simulator times faster.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ...errors import InvalidSchedule
from ...graph import node_labels
from ...schedule import COMPUTE, FREE, OFFLOAD, PREFETCH, Link, Op, Reason, Schedule, reason, simulate
from ..deadline import Deadline, TimeUp
from .checkmate_model import CheckmateModel
from .grid import StageGrid, computes_from_ops

Transfers = tuple[np.ndarray, np.ndarray, np.ndarray]
"""``(R, OUT, IN + LATER)`` of a solution (0/1 matrices)."""
TransferSolve = Callable[[CheckmateModel, "np.ndarray | None", float], tuple["Transfers | None", dict[str, Any]]]
"""Solve a model with a link from a start vector within some seconds: its transfers (None: none found), and what
to report."""


def least_kept(grid: StageGrid, r: np.ndarray, out: np.ndarray, into: np.ndarray) -> list[set[int]]:
    """Per stage, the positions that must be resident when it starts: those its computes read from before it
    (neither computed earlier in it nor prefetched at its start), those it offloads, and those the next stage
    needs that it neither computes nor prefetches."""
    n = grid.n
    kept: list[set[int]] = [set() for _ in range(n + 1)]
    for t in range(n - 1, -1, -1):
        computed = [i for i in range(t + 1) if r[t, i] > 0.5]
        fetched = {int(i) for i in np.flatnonzero(into[t] > 0.5)}
        made: set[int] = set()
        needed = {int(i) for i in np.flatnonzero(out[t] > 0.5)}
        for k in computed:
            needed.update(p for p in grid.preds[k] if p not in made and p not in fetched)
            made.add(k)
        kept[t] = needed | (kept[t + 1] - made - fetched)
    return kept


def offload_stage_ops(grid: StageGrid, r: np.ndarray, out: np.ndarray, into: np.ndarray, *,
                      rule: str) -> tuple[list[Op], list[Reason]]:
    """Ops and reasons for a stage solution with transfers (0/1 matrices ``n x n``; see the module notes)."""
    n = grid.n
    least = least_kept(grid, r, out, into)
    labels = node_labels(grid.graph)
    name = [labels[grid.node_id(p)] for p in range(n)]
    ops: list[Op] = []
    reasons: list[Reason] = []

    def emit(action: str, position: int, text: str, stage: int) -> None:
        ops.append((action, grid.node_id(position)))
        reasons.append(reason(text, rule=rule if action == COMPUTE else f"{rule}-{action}", stage=stage))

    resident: set[int] = set()
    on_host: set[int] = set()
    for t in range(n):
        kept = least[t + 1]
        for i in np.flatnonzero(into[t] > 0.5).tolist():
            if i not in resident and i in on_host:
                emit(PREFETCH, i, f"{name[i]} prefetched at the start of stage {t}: read from here on", t)
                resident.add(i)
        leaving = set()
        for i in np.flatnonzero(out[t] > 0.5).tolist():
            if i in resident and i not in on_host:
                emit(OFFLOAD, i, f"{name[i]} offloaded during stage {t}, its device copy dropped at the stage's end", t)
                on_host.add(i)
                leaving.add(i)
        computes = [i for i in range(t + 1) if r[t, i] > 0.5]
        last_read: dict[int, int] = {}
        for k in computes:
            for p in grid.preds[k]:
                last_read[p] = k
        for k in computes:
            if k in resident:  # computed again while a copy is resident: the old one goes first
                emit(FREE, k, f"{name[k]} dropped before it is computed again in stage {t}", t)
                resident.discard(k)
            text = (f"stage {t}: the frontier reaches {name[k]}, computed for the first time" if k == t else
                    f"{name[k]} recomputed in stage {t} because the MILP keeps memory under budget")
            emit(COMPUTE, k, text, t)
            resident.add(k)
            for p in (*grid.preds[k], k):
                done = last_read.get(p) == k or (p == k and k not in last_read)
                if done and p in resident and p not in kept and p not in leaving:
                    emit(FREE, p, f"last read in stage {t} by {name[k]}", t)
                    resident.discard(p)
        for i in sorted(resident - kept):
            emit(FREE, i, f"{name[i]} not kept into stage {t + 1}" + (" (its copy is on the host)" if i in leaving
                                                                      else ""), t)
            resident.discard(i)
    return ops, reasons


def faster_with_offloads(grid: StageGrid, budget: int, recomputed: Schedule, link: Link, deadline: Deadline,
                         solve_model: TransferSolve, rule: str = "milp") -> Schedule:
    """The stage model with ``link`` solved by ``solve_model`` from ``recomputed`` (when it is in stage form) until
    ``deadline``; its schedule when the simulator times it faster than ``recomputed`` over the link within the
    budget, else ``recomputed``. ``solver_info["offload"]`` says what the model did."""
    graph = grid.graph
    start = computes_from_ops(grid, recomputed.ops) if not recomputed.has_transfers else None
    try:
        model = CheckmateModel(grid, grid.free_budget(budget), integral=True, deadline=deadline, link=link)
        found, info = solve_model(model, model.start_vector(start) if start is not None else None, deadline.left())
    except TimeUp:
        found, info = None, {"status": "time_limit (building the model)"}
    best = recomputed
    if found is not None:
        ops, reasons = offload_stage_ops(grid, *found, rule=rule)
        try:
            offloaded = simulate(graph, ops, budget=budget, link=link)
            kept = simulate(graph, recomputed, budget=budget, link=link)
        except InvalidSchedule as e:  # the solver's numbers off by a tolerance: keep the recompute-only one
            info["discarded"] = str(e)
        else:
            info.update(makespan=offloaded.makespan, recompute_only_makespan=kept.makespan)
            if offloaded.makespan < kept.makespan * (1 - 1e-12):
                best = Schedule.from_ops(ops, reasons, solver_info={k: v for k, v in recomputed.solver_info.items()
                                                                    if k not in ("source", "why", "source_info")})
    return best.with_updates(solver_info={**best.solver_info, "offload": info})


def highs_transfers(mip_gap: float = 0.0) -> TransferSolve:
    """Solve the model with HiGHS (its MILP)."""
    def solve_model(model: CheckmateModel, start: np.ndarray | None, seconds: float):
        solution = model.solve(seconds, mip_gap=mip_gap, start=start)
        info = {"status": solution.status, "objective": solution.objective, "lower_bound": solution.bound,
                **model.size().as_dict()}
        found = (solution.r, solution.out, solution.into) if solution.r is not None else None
        return found, info
    return solve_model


TIME_STEPS = 10 ** 6
"""CP-SAT's times are integers: a step's compute time is cut into about this many units (rounded up)."""


def cpsat_transfers(workers: int = 2, seed: int = 0) -> TransferSolve:
    """Solve the model with CP-SAT: its rows with integer coefficients (memory in the sizes' gcd, times in units of
    the step's compute time over :data:`TIME_STEPS`, rounded up), every variable integral, the hint from the start."""
    def solve_model(model: CheckmateModel, start: np.ndarray | None, seconds: float):
        from ortools.sat.python import cp_model  # loaded with the first CP model

        if model.units.unit != model.units.gcd:
            return None, {"status": "refused: sizes span too many orders of magnitude for integer memory units"}
        matrix, lower, upper = model._matrix, model._row_lower, model._row_upper
        t_cols = set(model.t_col[model.t_col >= 0].tolist())
        scale = TIME_STEPS / max(float(model.grid.cost.sum()), 1e-12)
        upper_bounds = model.column_upper()
        cp = cp_model.CpModel()
        x = [cp.NewIntVar(0, int(math.floor(upper_bounds[c] + 1e-9)) if math.isfinite(upper_bounds[c]) else 10 ** 12,
                          f"x{c}") for c in range(model.num_cols)]
        for c in model.r_col[np.arange(model.grid.n), np.arange(model.grid.n)].tolist():
            cp.Add(x[c] == 1)  # the frontier advances
        for row in range(matrix.shape[0]):
            cols = matrix.indices[matrix.indptr[row]:matrix.indptr[row + 1]]
            vals = matrix.data[matrix.indptr[row]:matrix.indptr[row + 1]]
            timed = any(c in t_cols for c in cols)
            terms = []
            for c, v in zip(cols.tolist(), vals.tolist()):
                if timed:
                    v = -1 if c in t_cols else math.ceil(v * scale)
                elif abs(v - round(v)) > 1e-9:
                    return None, {"status": "refused: a memory coefficient is not a whole number of units"}
                terms.append(int(round(v)) * x[c])
            expression = sum(terms)
            if math.isfinite(lower[row]) and math.isfinite(upper[row]) and lower[row] == upper[row]:
                cp.Add(expression == int(round(lower[row])))
                continue
            if math.isfinite(lower[row]):
                cp.Add(expression >= int(math.ceil(lower[row] - 1e-9)))
            if math.isfinite(upper[row]):
                cp.Add(expression <= int(math.floor(upper[row] + 1e-9)))
        copies = [c for m in (model.out_col, model.in_col, model.later_col) for c in m[m >= 0].tolist()]
        cp.Minimize((len(copies) + 1) * sum(x[c] for c in t_cols) + sum(x[c] for c in copies))
        if start is not None:
            for c, value in enumerate(start.tolist()):
                cp.AddHint(x[c], int(math.ceil(value * scale - 1e-9)) if c in t_cols else int(round(value)))
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(seconds, 0.01)
        solver.parameters.num_workers = workers
        solver.parameters.random_seed = seed
        status = solver.Solve(cp)
        info = {"status": solver.StatusName(status).lower(), **model.size().as_dict()}
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None, info
        values = np.array([solver.Value(v) for v in x], dtype=float)
        info["objective"] = sum(values[c] for c in t_cols) / scale
        r = np.zeros((model.grid.n, model.grid.n))
        r[model.r_col >= 0] = values[model.r_col[model.r_col >= 0]]
        return (r, *model.transfers(values)), info
    return solve_model
