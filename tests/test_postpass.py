"""The shared post-passes: tighten (drop useless computes, free early) and the eviction replay."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import compute_graphs, structured_graphs

from remat_core import InfeasibleBudget, checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound, simulate
from remat_core.graph.generators import training_chain
from remat_core.schedule.postpass import PassReason, evict_to_budget, reason_objects, tighten
from remat_core.schedule.schedule import COMPUTE, FREE
from remat_core.schedule import checkpoint_all_ops


def wasteful_schedule(graph, seed):
    """A valid schedule with useless recomputations, late frees and tensors never freed."""
    rng = random.Random(seed)
    resident = {n.id for n in graph.nodes if n.pinned}
    ops = []

    def ensure(v):
        for p in graph.preds(v):
            if p not in resident:
                ensure(p)
        ops.append((COMPUTE, v))
        resident.add(v)

    order = [graph.ids[i] for i in graph.topo_idx if not graph.pinned[i]]
    for v in order:
        if v in resident and rng.random() < 0.5:
            ops.append((FREE, v))
            resident.discard(v)
        if v not in resident:
            ensure(v)
        for u in sorted(resident - {n.id for n in graph.nodes if n.pinned}):
            if rng.random() < 0.2:
                ops.append((FREE, u))
                resident.discard(u)
        if rng.random() < 0.3:  # a useless extra computation of something cheap
            extra = rng.choice(order)
            if extra not in resident and all(p in resident for p in graph.preds(extra)):
                ops.append((COMPUTE, extra))
                resident.add(extra)
    for o in graph.outputs:
        if not any(op == (COMPUTE, o) for op in ops):
            ensure(o)
    return ops


@given(compute_graphs(), st.integers(0, 1000))
def test_tighten_never_adds_memory_or_cost_and_stays_valid(graph, seed):
    ops = wasteful_schedule(graph, seed)
    before = simulate(graph, ops)
    tight, reasons = tighten(graph, ops, [None] * len(ops))
    after = simulate(graph, tight)
    assert after.peak <= before.peak and after.cost <= before.cost
    assert len(reasons) == len(tight)
    assert after.memory[-1] == graph.pinned_bytes  # everything is freed after its last reader
    assert tighten(graph, tight, reasons)[0] == tight  # idempotent


def test_tighten_drops_a_useless_compute_and_moves_a_free():
    g = training_chain(2)
    ops = [("compute", "f1"), ("compute", "f2"), ("free", "f2"), ("compute", "f2"), ("compute", "loss"),
           ("compute", "b2"), ("compute", "b1"), ("free", "loss"), ("free", "f2"), ("free", "b2"), ("free", "f1"),
           ("free", "b1")]
    tight, reasons = tighten(g, ops)
    assert tight.count(("compute", "f2")) == 1
    assert tight.index(("compute", "b2")) < tight.index(("free", "loss")) < tight.index(("compute", "b1"))
    assert reasons[tight.index(("free", "loss"))]["rule"] == "last-use"
    assert simulate(g, tight).cost == checkpoint_all_cost(g)


def test_tighten_keeps_the_only_computation_of_an_unread_output():
    g = training_chain(1)
    ops = [("compute", "f1"), ("compute", "loss"), ("compute", "b1")]
    assert ("compute", "b1") in tighten(g, ops)[0]


@given(structured_graphs(), st.floats(0.3, 1.0))
def test_eviction_replay_fits_the_budget_or_says_it_cannot(graph, fraction):
    lower, peak = memory_lower_bound(graph), checkpoint_all_peak(graph)
    budget = max(lower, int(peak * fraction))
    ops, reasons = checkpoint_all_ops(graph)
    for reuse in (False, True):
        try:
            out, why = evict_to_budget(graph, ops, reasons, budget, reuse=reuse)
        except InfeasibleBudget as e:
            assert e.budget == budget and "no room" in e.detail
            continue
        result = simulate(graph, out, budget=budget)
        assert result.peak <= budget
        assert len(why) == len(out) and all(isinstance(r, dict) for r in why)
        rules = {r["rule"] for r in why}
        assert rules <= {"topological-order", "last-use", "evict", "evict-recompute"}


def test_eviction_replay_at_a_roomy_budget_changes_nothing():
    g = training_chain(20, mem=10)
    ops, reasons = checkpoint_all_ops(g)
    out, _ = evict_to_budget(g, ops, reasons, checkpoint_all_peak(g))
    assert simulate(g, out).cost == checkpoint_all_cost(g)


def test_eviction_replay_recomputes_what_it_evicted():
    g = training_chain(30)
    ops, reasons = checkpoint_all_ops(g)
    budget = checkpoint_all_peak(g) // 2
    out, why = evict_to_budget(g, ops, reasons, budget)
    result = simulate(g, out, budget=budget)
    assert result.recomputes > 0
    evicted = {op[1] for op, r in zip(out, why) if r["rule"] == "evict"}
    recomputed = {op[1] for op, r in zip(out, why) if r["rule"] == "evict-recompute"}
    assert recomputed and recomputed <= evicted
    assert all("make room for" in r["text"] for r in why if r["rule"] == "evict")


@settings(max_examples=30)
@given(structured_graphs(), st.integers(0, 1000))
def test_reuse_replay_with_room_to_spare_computes_each_node_once(graph, seed):
    ops = wasteful_schedule(graph, seed)
    roomy = sum(graph.mem)
    out, _ = evict_to_budget(graph, ops, [None] * len(ops), roomy, reuse=True)
    assert simulate(graph, out).cost == pytest.approx(checkpoint_all_cost(graph))


def test_pass_reasons_become_reason_objects():
    g = training_chain(2)
    why = reason_objects(g, [PassReason("evict", 1, 2, 7), PassReason("last-use", 1), None, {"text": "kept"}])
    assert why[0]["rule"] == "evict" and why[0]["consumer"] == "f2" and "step 7" in why[0]["text"]
    assert why[1]["rule"] == "last-use" and why[2] is None and why[3] == {"text": "kept"}
