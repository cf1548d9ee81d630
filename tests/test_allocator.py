"""The caching-allocator model: PyTorch's rules on hand-computed cases, and schedules replayed through it."""

import base64
import json
import os
import pickle
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from strategies import training_graphs

from remat_core import ComputeGraph, Node, save_graph, simulate, solve, solve_outcome
from remat_core.graph import layered_training_chain, training_chain
from remat_core.schedule import checkpoint_all_ops, checkpoint_all_peak, memory_lower_bound
from remat_core.schedule.allocator import (AllocatorConfig, CachingAllocator, OutOfMemory, allocation_events,
                                           memory_viz_snapshot, replay, round_size, segment_size)

MiB = 1 << 20


def checkpoint_all(graph: ComputeGraph) -> list:
    return checkpoint_all_ops(graph, explain=False)[0]


def free_sizes(allocator: CachingAllocator, pool: str) -> list[int]:
    return [size for size, _, _ in allocator.free[pool]]


# -- the allocator's documented worked cases ---------------------------------------------------------------


def test_a_one_byte_request_takes_a_512_byte_block_of_a_new_2_mib_small_segment():
    allocator = CachingAllocator()
    block = allocator.malloc("a", 1)
    assert block.size == 512 and allocator.reserved == 2 * MiB and allocator.allocated == 512
    assert free_sizes(allocator, "small") == [2_096_640]


def test_one_mib_exactly_is_small_and_splits_its_2_mib_segment():
    allocator = CachingAllocator()
    allocator.malloc("a", MiB)
    assert allocator.segments[0].pool == "small" and allocator.reserved == 2 * MiB
    assert free_sizes(allocator, "small") == [MiB]


def test_just_over_one_mib_is_large_and_takes_a_20_mib_segment():
    allocator = CachingAllocator()
    block = allocator.malloc("a", 1_048_577)
    assert block.size == 1_049_088 and allocator.reserved == 20 * MiB
    assert free_sizes(allocator, "large") == [19_922_432]


def test_ten_mib_gets_a_segment_of_its_own_size_and_no_split():
    allocator = CachingAllocator()
    allocator.malloc("a", 10 * MiB)
    assert allocator.reserved == 10 * MiB and free_sizes(allocator, "large") == []


def test_just_over_ten_mib_rounds_the_segment_to_2_mib_and_splits_the_rest():
    allocator = CachingAllocator()
    block = allocator.malloc("a", 10_485_761)
    assert block.size == 10_486_272 and allocator.reserved == 12_582_912
    assert free_sizes(allocator, "large") == [2_096_640]


def test_a_large_remainder_of_one_mib_or_less_stays_with_the_block():
    allocator = CachingAllocator()
    allocator.malloc("a", 19 * MiB)  # a 20 MiB segment: 1 MiB left, not more than 1 MiB, so no split
    assert allocator.allocated == 20 * MiB and free_sizes(allocator, "large") == []


@pytest.mark.parametrize("size, rounded", [(0, 512), (511, 512), (512, 512), (513, 1024), (3 * MiB + 1, 3 * MiB + 512)])
def test_requests_round_to_512_bytes(size, rounded):
    assert round_size(size) == rounded


def test_power_of_two_divisions_round_to_the_next_division():
    config = AllocatorConfig(roundup_power2_divisions=4)
    assert round_size(1_300_000, config) == 1_310_720  # 1 MiB + 256 KiB divisions: 1.25 MiB
    assert round_size(2 * MiB, config) == 2 * MiB and round_size(600, config) == 1024


@pytest.mark.parametrize("rounded, segment", [(512, 2 * MiB), (MiB, 2 * MiB), (MiB + 512, 20 * MiB),
                                              (10 * MiB, 10 * MiB), (11 * MiB, 12 * MiB)])
def test_segment_sizes(rounded, segment):
    assert segment_size(rounded) == segment


def test_best_fit_takes_the_smallest_free_block_that_holds_the_request():
    allocator = CachingAllocator()
    for name in "abcde":
        allocator.malloc(name, 2 * MiB)  # one 20 MiB segment, 10 MiB free after these
    allocator.free_block("b")
    allocator.free_block("d")
    assert free_sizes(allocator, "large") == [2 * MiB, 2 * MiB, 10 * MiB]
    block = allocator.malloc("f", 2 * MiB)
    assert block.address == allocator.segments[0].address + 2 * MiB  # the lowest of the equal best fits: b's
    assert allocator.reserved == 20 * MiB


def test_a_free_merges_with_its_free_neighbours_and_reserved_never_drops():
    allocator = CachingAllocator()
    for name in "abc":
        allocator.malloc(name, 4 * MiB)
    allocator.free_block("a")
    allocator.free_block("c")
    allocator.free_block("b")
    assert free_sizes(allocator, "large") == [20 * MiB] and allocator.allocated == 0
    assert allocator.reserved == 20 * MiB


def test_fragmented_free_memory_cannot_serve_a_request_and_a_new_segment_is_cut():
    allocator = CachingAllocator()
    for name in "abcde":
        allocator.malloc(name, 4 * MiB)
    allocator.free_block("b")
    allocator.free_block("d")  # 4 + 4 + 4 MiB free, in three pieces
    allocator.malloc("f", 6 * MiB)
    assert allocator.reserved == 40 * MiB and allocator.largest_free() == 14 * MiB


def test_max_split_size_keeps_oversize_blocks_whole_and_from_small_requests():
    config = AllocatorConfig(max_split_size=20 * MiB)
    allocator = CachingAllocator(config)
    allocator.malloc("big", 30 * MiB)
    allocator.free_block("big")
    allocator.malloc("small", 4 * MiB)  # may not take the cached 30 MiB block: a segment of its own
    assert allocator.reserved == 50 * MiB
    allocator.malloc("near", 25 * MiB)  # oversize: the 30 MiB block serves it whole (within 20 MiB of rounding)
    assert allocator.reserved == 50 * MiB and allocator.allocated == 4 * MiB + 30 * MiB  # the whole block


def test_expandable_segments_grow_one_segment_in_pages():
    allocator = CachingAllocator(AllocatorConfig(expandable_segments=True))
    allocator.malloc("a", 15 * MiB)
    allocator.malloc("b", 15 * MiB)
    large = [s for s in allocator.segments if s.pool == "large"]
    assert len(large) == 1 and allocator.reserved == 40 * MiB
    assert [b.size for b in large[0].blocks()] == [15 * MiB, 15 * MiB, 10 * MiB]


def test_a_capacity_first_releases_empty_cached_segments_then_runs_out():
    allocator = CachingAllocator(AllocatorConfig(capacity=32 * MiB))
    allocator.malloc("a", 12 * MiB)
    allocator.free_block("a")
    allocator.malloc("b", 30 * MiB)  # the empty 12 MiB segment is given back first
    assert allocator.reserved == 30 * MiB
    with pytest.raises(OutOfMemory, match="past the device's"):
        allocator.malloc("c", 4 * MiB)
    assert allocator.trace[-1]["action"] == "oom"


@pytest.mark.parametrize("text, expected", [
    ("max_split_size_mb:128,expandable_segments:True", AllocatorConfig(max_split_size=128 * MiB,
                                                                       expandable_segments=True)),
    (" roundup_power2_divisions:4 ", AllocatorConfig(roundup_power2_divisions=4)),
    ("", AllocatorConfig()),
])
def test_the_settings_read_like_pytorch_cuda_alloc_conf(text, expected):
    assert AllocatorConfig.parse(text) == expected


@pytest.mark.parametrize("text, says", [("max_split_size_mb:8", ">= 20"), ("garbage_collection:1", "unknown"),
                                        ("expandable_segments", "key:value"), ("roundup_power2_divisions:3", "power")])
def test_a_setting_that_does_not_fit_says_what_would(text, says):
    with pytest.raises(ValueError, match=says):
        AllocatorConfig.parse(text)


# -- a schedule replayed ---------------------------------------------------------------------------------


def test_a_chain_replayed_holds_the_rounded_bytes_the_simulator_counts():
    graph = training_chain(6, mem=3 * MiB + 100)
    ops = checkpoint_all(graph)
    result = replay(graph, ops)
    simulated = simulate(graph, ops)
    rounded = round_size(3 * MiB + 100)
    for allocated, memory in zip(result.allocated, simulated.memory):  # the input (pinned) is counted as well
        assert allocated == memory // (3 * MiB + 100) * rounded
    assert result.peak_reserved >= result.peak_allocated == max(result.allocated)
    assert all(0.0 <= f <= 1.0 for f in result.fragmentation)


@settings(max_examples=25, deadline=None)
@given(training_graphs())
def test_live_blocks_never_overlap_and_every_block_is_inside_a_segment(graph):
    graph = ComputeGraph([Node(**{**n.to_json(), "mem": n.mem * 300_000}) for n in graph.nodes], graph.edges,
                         graph.outputs)  # sizes of both pools
    halfway = (memory_lower_bound(graph) + checkpoint_all_peak(graph)) // 2
    outcome = solve_outcome(graph, halfway, "dtr")
    ops = outcome.schedule.ops if outcome.status == "feasible" else checkpoint_all(graph)
    result = replay(graph, ops)
    spans = [(b.address, b.address + b.size, b.start, len(ops) if b.end is None else b.end) for b in result.blocks]
    for k, (lo, hi, start, end) in enumerate(spans):
        for lo2, hi2, start2, end2 in spans[k + 1:]:
            if start < end2 and start2 < end:  # alive at the same time: apart in the address space
                assert hi <= lo2 or hi2 <= lo
    for b in result.blocks:
        assert any(s.address <= b.address and b.address + b.size <= s.address + s.size for s in result.segments)


def test_a_kernels_other_outputs_and_workspace_live_only_inside_its_op():
    nodes = [Node("x", MiB, 0, pinned=True), Node("a", MiB, 1, kernel="split"), Node("b", 2 * MiB, 1, kernel="split"),
             Node("c", MiB, 1, transient=3 * MiB)]
    graph = ComputeGraph(nodes, [("x", "a"), ("x", "b"), ("a", "c"), ("b", "c")], ["c"])
    ops = [("compute", "a"), ("compute", "b"), ("compute", "c"), ("free", "a"), ("free", "b")]
    events = [(e.kind, e.owner, e.size, e.step) for e in allocation_events(graph, ops)]
    assert events == [("malloc", "a", MiB, 0), ("malloc", "a@b", 2 * MiB, 0), ("free", "a@b", 2 * MiB, 0),
                      ("malloc", "b", 2 * MiB, 1),  # the call that made a made b: nothing more to run
                      ("malloc", "c", MiB, 2), ("malloc", "c@workspace", 3 * MiB, 2),
                      ("free", "c@workspace", 3 * MiB, 2),
                      ("free", "a", MiB, 3), ("free", "b", 2 * MiB, 4)]
    assert simulate(graph, ops).peak == MiB + 3 * MiB + 3 * MiB + MiB  # x, a, b, c and c's workspace
    result = replay(graph, ops)
    assert result.peak_allocated == 8 * MiB and result.allocated[2] == 5 * MiB


def test_the_snapshot_renders_in_pytorchs_memory_viz_without_a_gpu():
    from torch.cuda import _memory_viz as memory_viz
    graph = training_chain(5, mem=3 * MiB)
    snapshot = memory_viz_snapshot(replay(graph, checkpoint_all(graph)), {"f1": "layer 1"})
    assert pickle.loads(pickle.dumps(snapshot, protocol=4)) == snapshot
    trace = snapshot["device_traces"][0]
    assert trace[0]["action"] == "segment_alloc" and trace[1]["frames"][0]["filename"] == "x"  # the input, first
    assert any(e["frames"] and e["frames"][0]["filename"] == "layer 1" for e in trace)
    for segment in snapshot["segments"]:
        assert sum(b["size"] for b in segment["blocks"]) == segment["total_size"]
    assert f"segments: {len(snapshot['segments'])}\n" in memory_viz.segsum(snapshot)
    for html, view in ((memory_viz.trace_plot(snapshot), "Active Memory Timeline"),
                       (memory_viz.segment_plot(snapshot), "Allocator State History")):
        embedded = re.search(r'"base64": "([^"]+)"', html).group(1)  # the page carries the snapshot pickled
        assert view in html and pickle.loads(base64.b64decode(embedded)) == snapshot


# -- planning against reserved bytes ---------------------------------------------------------------------


def growing_chain() -> ComputeGraph:
    return layered_training_chain([(30 + 7 * i) * MiB + 100 for i in range(8)], [1.0] * 8, input_mem=5 * MiB)


def test_a_budget_on_reserved_bytes_holds_what_the_allocator_reserves():
    graph = growing_chain()
    config = AllocatorConfig(expandable_segments=True)
    budget = round(checkpoint_all_peak(graph) * 0.7)
    plain = solve(graph, budget, "rotor")
    assert replay(graph, plain, config).peak_reserved > budget  # planned on tensor bytes, it reserves more
    schedule = solve(graph, budget, "rotor", allocator=config)
    replayed = replay(graph, schedule, config)
    assert schedule.stats["peak_reserved"] == replayed.peak_reserved <= budget
    assert schedule.stats["peak"] <= replayed.peak_allocated <= replayed.peak_reserved
    assert schedule.solver_info["memory"] == "reserved"
    assert schedule.solver_info["allocator"] == "expandable_segments:True"


def test_a_reserved_budget_no_schedule_meets_is_refused_saying_what_the_allocator_reserved():
    graph = training_chain(6, mem=3 * MiB)  # 21 MiB of tensors: the first large segment alone is 20 MiB
    outcome = solve_outcome(graph, memory_lower_bound(graph), "rotor", allocator=AllocatorConfig())
    assert outcome.status == "infeasible" and "caching allocator reserves" in outcome.message


def test_the_store_keeps_solves_on_reserved_bytes_apart_from_solves_on_tensor_bytes(tmp_path):
    from remat_core.store import ResultStore, result_key, stored_solve
    graph, store = growing_chain(), ResultStore(tmp_path / "store.db")
    budget = round(checkpoint_all_peak(graph) * 0.7)
    keys = {result_key(graph, budget, "rotor", None, {}, config).digest
            for config in (None, AllocatorConfig(), AllocatorConfig(expandable_segments=True))}
    assert len(keys) == 3
    config = AllocatorConfig(expandable_segments=True)
    first = stored_solve(graph, budget, "rotor", store=store, allocator=config)
    again = stored_solve(graph, budget, "rotor", store=store, allocator=config)
    assert again.from_store and again.schedule.stats["peak_reserved"] == first.schedule.stats["peak_reserved"]


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "remat_core", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "REMAT_STORE": "off"}, timeout=300)


def test_the_command_line_solves_on_reserved_bytes_and_writes_a_memory_viz_snapshot(tmp_path):
    save_graph(growing_chain(), tmp_path / "g.json")
    solved = run_cli("solve", "g.json", "--budget", "70%", "--solver", "rotor", "--memory", "reserved",
                     "--allocator", "expandable_segments:True", "-o", "s.json", cwd=tmp_path)
    assert solved.returncode == 0, solved.stderr
    checked = run_cli("simulate", "g.json", "s.json", "--memory", "reserved", "--allocator", "expandable_segments:True",
                      "--snapshot", "s.pickle", cwd=tmp_path)
    report = json.loads(checked.stdout)
    assert report["allocator"]["peak_reserved"] <= report["budget"]
    snapshot = pickle.loads((tmp_path / "s.pickle").read_bytes())
    assert snapshot["segments"] and snapshot["device_traces"][0]


@pytest.mark.parametrize("args, says", [(["--allocator", "expandable_segments:True"], "add --memory reserved"),
                                        (["--memory", "reserved", "--allocator", "max_split_size_mb:5"], ">= 20"),
                                        (["--snapshot", "x.pickle"], "add --memory reserved")])
def test_allocator_arguments_that_do_not_fit_are_refused_with_what_would(tmp_path, args, says):
    graph = training_chain(4, mem=3 * MiB)
    save_graph(graph, tmp_path / "g.json")
    assert run_cli("solve", "g.json", "--budget", "100%", "-s", "checkpoint-all", "-o", "s.json",
                   cwd=tmp_path).returncode == 0
    refused = run_cli("simulate", "g.json", "s.json", *args, cwd=tmp_path)
    assert refused.returncode == 2 and says in refused.stderr


def test_a_fixed_schedule_placed_best_fit_needs_at_least_its_peak_and_a_slab_solver_fits_its_own_slab():
    from remat_core.solvers.eviction.slab import aligned, placed_extent
    graph = layered_training_chain([(3 + i % 4) * MiB + 100 for i in range(10)], [1.0] * 10, input_mem=MiB)
    budget = round(checkpoint_all_peak(graph) * 0.7)
    static = solve(graph, budget, "rotor")
    assert placed_extent(graph, static) >= static.stats["peak"]
    coop = solve(graph, placed_extent(graph, static), "coop")
    assert coop.stats["peak"] <= placed_extent(graph, static)
    everything = sum(aligned(m) for m in graph.mem)
    assert placed_extent(graph, solve(graph, checkpoint_all_peak(graph), "checkpoint-all")) <= everything


def test_the_summary_and_the_model_pages_table_name_what_kernels_hold():
    from remat_core.analysis import graph_summary, kernel_memory_rows
    nodes = [Node("x", MiB, 0, pinned=True), Node("a", MiB, 1, kernel="split"), Node("b", 2 * MiB, 1, kernel="split"),
             Node("c", MiB, 1, transient=3 * MiB)]
    graph = ComputeGraph(nodes, [("x", "a"), ("x", "b"), ("a", "c"), ("b", "c")], ["c"])
    summary = graph_summary(graph)
    assert (summary.transient_nodes, summary.largest_transient, summary.multi_output_calls) == (1, 3 * MiB, 1)
    rows = kernel_memory_rows(graph)
    assert [r["node"] for r in rows] == ["c", "a", "b"]  # by bytes held beyond the output: 3, 2 and 1 MiB
    assert rows[1] == {"node": "a", "transient": 0, "output": MiB, "call_outputs": 2, "siblings_bytes": 2 * MiB}
