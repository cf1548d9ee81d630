"""POFO on chains: its dynamic program against brute force over the same family of plans, its prediction against the
simulator, and Rotor when there is no link."""

from __future__ import annotations

import random

import pytest

from remat_core import ComputeGraph, checkpoint_all_peak, memory_lower_bound, solve
from remat_core.graph.generators import layered_training_chain, training_chain
from remat_core.schedule import Link
from remat_core.solvers.chains.chain import Chain, linear_chain
from remat_core.solvers.chains.plans import EARLY, KEEP, LATE, Leaf, Plan, Split, Tape, measure_plan, offloaded_input


def family(chain: Chain, s: int, t: int) -> list[Plan]:
    """Every plan of the family over links ``s..t``: Rotor's trees, each Tape and Split keeping or offloading its input
    (early or late)."""
    if s == t:
        return [Leaf(t)]
    plans: list[Plan] = []
    if chain.link(s).tape:
        for rest in family(chain, s + 1, t):
            modes = (KEEP, EARLY, LATE) if offloaded_input(chain, Tape(s, rest)) else (KEEP,)
            plans += [Tape(s, rest, mode) for mode in modes]
    for j in range(s, t):
        rights, lefts = family(chain, j + 1, t), family(chain, s, j)
        modes = (KEEP, EARLY, LATE) if offloaded_input(chain, Split(s, j, rights[0], lefts[0])) else (KEEP,)
        plans += [Split(s, j, right, left, mode) for right in rights for left in lefts for mode in modes]
    return plans


def brute_force(graph, link: Link) -> dict[int, float]:
    """The least makespan the simulator measures over the family at each peak the family reaches."""
    chain = linear_chain(graph, "articulation")
    best: dict[int, float] = {}
    for plan in family(chain, 1, chain.length):
        measured = measure_plan(chain, plan, "brute", link)
        best[measured.peak] = min(best.get(measured.peak, float("inf")), measured.cost)
    return best


def reading_outputs(graph: ComputeGraph) -> ComputeGraph:
    """The chain with every gradient ``b_i`` also reading its layer's output ``f_i`` (a sigmoid's backward does): each
    link then has a tape, and Tapes join the family."""
    layers = [n.id for n in graph.nodes if n.kind == "forward"]
    edges = list(graph.edges) + [(f, "b" + f[1:]) for f in layers]
    return ComputeGraph(graph.nodes, edges, outputs=[graph.ids[o] for o in graph.output_idx],
                        name=graph.name + "-taped")


def random_chains(count: int, seed: int = 7):
    """Chains of 1 to 6 stages, sizes and times in {1, 2, 3}, each with a link of bandwidths in {1, 2, 3}, a latency of
    0 or 0.5, full or half duplex; every third with taped links."""
    rng = random.Random(seed)
    for k in range(count):
        stages = rng.randint(1, 6)
        values = lambda: [rng.choice((1, 2, 3)) for _ in range(stages)]  # noqa: E731
        graph = layered_training_chain(values(), [float(c) for c in values()], [float(c) for c in values()],
                                       input_mem=rng.choice((1, 2, 3)), loss_mem=rng.choice((1, 2, 3)))
        link = Link(float(rng.choice((1, 2, 3))), float(rng.choice((1, 2, 3))), latency=rng.choice((0.0, 0.5)),
                    full_duplex=rng.random() < 0.7)
        yield (reading_outputs(graph) if k % 3 == 2 else graph), link


@pytest.mark.parametrize("graph, link", list(random_chains(24)), ids=lambda x: getattr(x, "name", ""))
def test_pofo_equals_brute_force_and_predicts_the_simulator(graph, link) -> None:
    """At every budget below the checkpoint-all peak: pofo's makespan is the family's least, and the table predicted
    exactly what the simulator measures for pofo's schedule."""
    best = brute_force(graph, link)
    for budget in range(memory_lower_bound(graph), checkpoint_all_peak(graph)):
        fitting = [makespan for peak, makespan in best.items() if peak <= budget]
        try:
            schedule = solve(graph, budget, "pofo", link=link, segmentation="articulation")
        except Exception as refusal:  # noqa: BLE001 - the family has no plan here either
            assert not fitting, (budget, refusal)
            continue
        assert schedule.stats["makespan"] == pytest.approx(min(fitting), abs=1e-9), budget
        if schedule.solver_info.get("offload"):
            assert schedule.solver_info["predicted"] == pytest.approx(schedule.stats["makespan"], abs=1e-9)


def test_pofo_without_a_link_is_rotor() -> None:
    graph = layered_training_chain([4, 1, 6, 2, 5], [1, 3, 1, 2, 1])
    for budget in range(memory_lower_bound(graph), checkpoint_all_peak(graph) + 1):
        pofo, rotor = solve(graph, budget, "pofo"), solve(graph, budget, "rotor")
        assert pofo.ops == rotor.ops and pofo.stats["cost"] == rotor.stats["cost"]


def test_offloading_beats_recompute_only_on_a_uniform_chain() -> None:
    """The issue's chain: 8 stages, forward 1, backward 2, activation 1, bandwidth 1, at a tight budget."""
    graph = training_chain(8, mem=1, cost=1.0)
    link = Link(1.0, 1.0)
    budget = memory_lower_bound(graph)
    offloaded, recomputed = solve(graph, budget, "pofo", link=link), solve(graph, budget, "rotor", link=link)
    assert offloaded.stats["makespan"] < recomputed.stats["makespan"]
    assert offloaded.stats["bytes_to_host"] > 0 and offloaded.stats["peak"] <= budget
    kinds = {action for action, _ in offloaded.ops}
    assert {"offload", "prefetch"} <= kinds
