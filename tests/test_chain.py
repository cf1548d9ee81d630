"""The link chain of _chain.py and the shared op builder ops_from_computes."""

import pytest
from hypothesis import given
from strategies import compute_graphs

from remat_core import ComputeGraph, Node, simulate
from remat_core.graph.generators import training_chain
from remat_core.schedule.ops import ops_from_computes
from remat_core.solvers.chains.chain import chains, linear_chain, local_peak
from remat_core.solvers.chains.plans import Leaf, Split, Tape, measure_plan, plan_computes, tape_chain


def ids(graph, nodes):
    return [graph.ids[v] for v in nodes]


def graph_of(edges, mems=None, kinds=None, outputs=None):
    names = list(dict.fromkeys(n for e in edges for n in e))
    mems, kinds = mems or {}, kinds or {}
    return ComputeGraph([Node(n, mems.get(n, 1), 1.0, kinds.get(n, "forward")) for n in names], edges, outputs)


def test_training_chain_links_and_groups():
    g = training_chain(4)
    chain = linear_chain(g)
    assert chain.segmentation == "articulation" and chain.length == 5
    assert [ids(g, s.forward) for s in chain.links] == [["f1"], ["f2"], ["f3"], ["f4"], ["loss"]]
    # b_i reads f_{i-1}, the input of link i; b1 reads only pinned x and b2, so it runs with b2
    assert [ids(g, s.backward) for s in chain.links] == [[], ["b2", "b1"], ["b3"], ["b4"], []]
    assert [ids(g, chain.boundaries[k]) for k in range(6)] == [[], ["f1"], ["f2"], ["f3"], ["f4"], []]
    assert ids(g, chain.link(5).tape) == ["loss"]  # read by group 4: carried, part of the frontier
    assert chain.frontier_bytes == (0, 1, 1, 1, 0)


def test_merge_tail_folds_the_loss_into_the_last_layer():
    g = training_chain(4)
    chain = linear_chain(g, merge_tail=True)
    assert chain.length == 4 and ids(g, chain.link(4).forward) == ["f4", "loss"]
    assert ids(g, chain.link(4).backward) == ["b4"]


def test_cut_vertices_of_a_diamond():
    g = graph_of([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e")])
    chain = linear_chain(g, "articulation")
    assert [ids(g, s.forward) for s in chain.links] == [["a"], ["b", "c", "d"], ["e"]]
    assert [ids(g, chain.boundaries[k]) for k in range(4)] == [[], ["a"], ["d"], []]


def test_linearisation_keeps_live_sets_and_auto_tries_both():
    # a long skip a -> e: only the gap after a is a cut
    g = graph_of([("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("a", "e")])
    chain = linear_chain(g, "linear")
    assert chain.segmentation == "linear" and chain.length == 5
    assert ids(g, chain.boundaries[2]) == ["a", "b"]
    assert sorted(ids(g, chain.boundaries[3])) == ["a", "c"]
    assert [c.segmentation for c in chains(g, "auto")] == ["articulation", "linear"]
    assert [c.length for c in chains(g, "auto")] == [2, 5]
    # on a plain chain every gap is a cut: one chain to try, not two
    assert len(chains(training_chain(4), "auto")) == 1
    with pytest.raises(ValueError, match="segmentation must be one of"):
        chains(g, "zigzag")


def test_skip_gradient_joins_the_latest_group_that_has_its_inputs():
    # u is read by forward link d (a skip): its gradient can run in d's group, where u is in the input boundary
    # (links u, v, w, d); gv reads v, which no link after w reads: it must run by group 3
    edges = [("u", "v"), ("v", "w"), ("w", "d"), ("u", "d"), ("d", "gd"), ("u", "gd"), ("gd", "gv"), ("v", "gv")]
    kinds = {"gd": "backward", "gv": "backward"}
    g = graph_of(edges, kinds=kinds, outputs=["gv"])
    chain = linear_chain(g, "linear")
    group = {g.ids[b]: s.index for s in chain.links for b in s.backward}
    assert group == {"gd": 4, "gv": 3}


def test_max_links_keeps_small_boundaries():
    g = training_chain(20)
    chain = linear_chain(g, max_links=5)
    assert chain.length <= 5
    covered = [v for s in chain.links for v in s.forward]
    assert sorted(covered) == sorted(v for v in g.needed_idx if g.nodes[v].kind != "backward")


def test_plans_flatten_to_valid_schedules_with_reasons():
    g = training_chain(5)
    chain = linear_chain(g)
    plan = Split(1, 3, tape_chain(4, 6), tape_chain(1, 3))
    candidate = measure_plan(chain, plan, "test")
    result = simulate(g, candidate.ops)
    assert result.peak == candidate.peak and result.cost == candidate.cost
    rules = {r["rule"] for r in candidate.reasons}
    assert {"test-advance", "test-tape", "test-backward", "test-free"} <= rules
    advance = [r for r in candidate.reasons if r["rule"] == "test-advance"]
    assert all(r["checkpoint"] == "{layer 3 (fwd)}" and r["segment"] == [1, 3] for r in advance)


def test_plan_computes_says_computed_then_recomputed():
    g = training_chain(3)
    chain = linear_chain(g)
    computes, reasons = plan_computes(chain, Split(1, 1, Tape(2, Leaf(3)), Leaf(1)), "p")
    texts = [r["text"] for r in reasons]
    assert texts[0].startswith("layer 1 (fwd) computed") and all("recomputed" not in t for t in texts)
    computes, reasons = plan_computes(chain, Split(1, 2, Leaf(3), Split(1, 1, Leaf(2), Leaf(1))), "p")
    assert sum("recomputed" in r["text"] for r in reasons) == 1  # f1 again, to reach f2's group


def test_ops_from_computes_frees_each_instance_after_its_last_reader():
    g = graph_of([("a", "b"), ("b", "c"), ("a", "c")])
    a, b, c = (g.index[n] for n in "abc")
    ops, reasons = ops_from_computes(g, [a, b, a, c], [{"text": "x", "rule": "r"}] * 4)
    # the first a is read by b, then a is computed again for c
    assert ops == [("compute", "a"), ("compute", "b"), ("free", "a"), ("compute", "a"), ("compute", "c"),
                   ("free", "b"), ("free", "a"), ("free", "c")]
    assert reasons[0]["consumer"] == "b" and reasons[3]["consumer"] == "c"
    assert reasons[2]["text"] == "last read by b (fwd) until a (fwd) is next computed"
    simulate(g, ops)


def test_ops_from_computes_drops_unread_recomputations():
    g = graph_of([("a", "b"), ("b", "c")])
    a, b, c = (g.index[n] for n in "abc")
    ops, reasons = ops_from_computes(g, [a, b, a, b, c], [{"text": str(i)} for i in range(1, 6)])
    # c reads the second b, which reads the second a: the first a and b are never read
    assert ops == [("compute", "a"), ("compute", "b"), ("free", "a"), ("compute", "c"), ("free", "b"),
                   ("free", "c")]
    assert reasons[0]["text"] == "3" and reasons[1]["text"] == "4"  # the kept computations keep their reasons
    ops, _ = ops_from_computes(g, [a, b, c, a, b], None)  # recomputed after the end: useless
    assert [op for op in ops if op[0] == "compute"] == [("compute", "a"), ("compute", "b"), ("compute", "c")]


def test_ops_from_computes_refuses_a_read_before_any_computation():
    g = graph_of([("a", "b")])
    with pytest.raises(ValueError, match="reads 'a', which was never computed"):
        ops_from_computes(g, [g.index["b"]], None)


def test_local_peak():
    g = graph_of([("a", "b"), ("b", "c"), ("a", "c")], mems={"a": 4, "b": 2, "c": 1})
    a, b, c = (g.index[n] for n in "abc")
    assert local_peak(g, [b, c], {a}, set()) == 7          # a + b + c at c
    assert local_peak(g, [b], {a}, {a}) == 6               # a kept, b freed after
    assert local_peak(g, [], {a}, set()) == 0              # nothing reads a, nothing keeps it


@given(compute_graphs())
def test_every_needed_node_has_a_link_or_a_group(graph):
    chain = linear_chain(graph)
    forward = [v for s in chain.links for v in s.forward]
    backward = [v for s in chain.links for v in s.backward]
    assert sorted(forward + backward) == sorted(graph.needed_idx)
    for s in chain.links:
        assert set(s.advance) <= set(s.taped) and set(s.leaf) <= set(s.taped)
