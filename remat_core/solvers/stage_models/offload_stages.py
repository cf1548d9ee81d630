"""Checkmate's MILP with a transfer lane: a stage solution with offloads and prefetches, as ops.

The model is :class:`~.checkmate_model.CheckmateModel` given a link (its notes have the rows). Its solution
says, per stage, what is computed (``R``), copied out (``OUT``) and back (``IN``), all integral; what is kept
(``S``, continuous in the model, and free to be more than needed) is derived as the least the others need,
which holds no more memory than the model counted. The ops follow:
at the start of stage ``t`` the prefetches of ``IN[t]`` and the offloads of ``OUT[t]``, then the stage's
computes in order, each tensor freed after its last reader of the stage unless the next stage keeps it or
it is being offloaded; at the stage's end whatever the next stage does not keep is freed (an offloaded
tensor waits there for its copy). The simulator times the result over the link.
"""

from __future__ import annotations

import numpy as np

from ...graph import node_labels
from ...schedule import COMPUTE, FREE, OFFLOAD, PREFETCH, Op, Reason, reason
from .grid import StageGrid


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
