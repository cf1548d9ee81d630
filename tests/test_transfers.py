"""The transfer lane of the one simulator: offload and prefetch ops, timed on their own lane beside the compute lane."""

import json
import math
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from strategies import compute_graphs

from remat_core import ComputeGraph, InvalidSchedule, Node, Schedule, simulate, solve
from remat_core.graph import training_chain
from remat_core.schedule import Link, checkpoint_all_ops
from remat_core.schedule.schedule import ACTIONS

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "remat-schedule.schema.json").read_text())


def three_ops() -> ComputeGraph:
    """x (pinned) -> a -> b -> c, and c reads a too: a is needed again after b."""
    nodes = [Node("x", 2, 0, "input", True), Node("a", 4, 1, "forward"), Node("b", 4, 1, "forward"),
             Node("c", 1, 2, "forward")]
    return ComputeGraph(nodes, [("x", "a"), ("a", "b"), ("b", "c"), ("a", "c")], outputs=["c"], name="three")


OFFLOADED = [("compute", "a"), ("offload", "a"), ("compute", "b"), ("free", "a"), ("prefetch", "a"),
             ("compute", "c")]
LINK = Link(to_host=2.0, to_device=4.0, latency=0.5)


def test_an_offloaded_tensor_is_timed_by_hand():
    """a computed [0, 1]; its offload [1, 3.5] (0.5 + 4 bytes / 2); b [1, 2]; the free of a waits for the offload
    (stall 1.5); the prefetch [3.5, 5] (0.5 + 4 / 4); c waits for it (stall 1.5) and runs [5, 7]."""
    result = simulate(three_ops(), OFFLOADED, link=LINK)
    timing = result.timing
    assert timing.start == (0.0, 1.0, 1.0, 3.5, 3.5, 5.0) and timing.end == (1.0, 3.5, 2.0, 3.5, 5.0, 7.0)
    assert timing.makespan == result.makespan == 7.0 and timing.compute_stall == 3.0 and timing.transfer_stall == 0.0
    assert (timing.host_peak, timing.to_host, timing.to_device) == (4, 4, 4)
    assert result.memory == (6, 6, 10, 6, 10, 11) and result.peak == 11 and result.cost == 4.0


def test_a_half_duplex_link_runs_both_directions_on_one_lane():
    graph = three_ops()
    ops = [("compute", "a"), ("offload", "a"), ("compute", "b"), ("offload", "b"), ("free", "a"),
           ("prefetch", "a"), ("compute", "c")]
    full = simulate(graph, ops, link=Link(1.0, 1.0)).timing
    half = simulate(graph, ops, link=Link(1.0, 1.0, full_duplex=False)).timing
    # b's offload [5, 9] holds the one lane: a's prefetch waits for it (full duplex: [5, 9] beside it)
    assert full.start[5] == 5.0 and half.start[5] == 9.0 and half.makespan > full.makespan


def test_a_prefetch_counts_against_the_budget_from_its_op():
    """a is offloaded and freed before d: memory 6 until the prefetch brings a's 4 bytes back beside d's."""
    nodes = [Node("x", 2, 0, "input", True), Node("a", 4, 1, "forward"), Node("d", 4, 1, "forward"),
             Node("c", 1, 2, "forward")]
    graph = ComputeGraph(nodes, [("x", "a"), ("x", "d"), ("d", "c"), ("a", "c")], outputs=["c"])
    ops = [("compute", "a"), ("offload", "a"), ("free", "a"), ("compute", "d"), ("prefetch", "a"), ("compute", "c")]
    with pytest.raises(InvalidSchedule, match="step 4 .*prefetched tensor"):
        simulate(graph, ops, budget=9, link=LINK)
    assert simulate(graph, ops, budget=11, link=LINK).peak == 11


@pytest.mark.parametrize("ops, message", [
    ([("compute", "a"), ("offload", "a")], "needs the transfer lane"),
    ([("compute", "a"), ("free", "a"), ("prefetch", "a")], "no host copy"),
    ([("offload", "a")], "not resident"),
    ([("offload", "x")], "pinned"),
    ([("compute", "a"), ("offload", "a"), ("offload", "a")], "already has a host copy"),
    ([("compute", "a"), ("offload", "a"), ("prefetch", "a")], "already resident"),
    ([("compute", "a"), ("move", "a")], "unknown action 'move'"),
])
def test_transfer_ops_that_break_a_rule_say_which(ops, message):
    link = None if message == "needs the transfer lane" else LINK
    with pytest.raises(InvalidSchedule, match=message):
        simulate(three_ops(), ops + [("compute", "b"), ("compute", "c")], link=link)


@settings(max_examples=30)
@given(graph=compute_graphs())
def test_without_transfers_a_link_changes_nothing_and_the_makespan_is_the_cost(graph):
    ops, _ = checkpoint_all_ops(graph, explain=False)
    plain = simulate(graph, ops)
    linked = simulate(graph, ops, link=LINK)
    assert (linked.peak, linked.cost, linked.memory, linked.transient) == (plain.peak, plain.cost, plain.memory,
                                                                           plain.transient)
    assert plain.timing is None and plain.makespan == plain.cost
    assert math.isclose(linked.makespan, linked.cost) and linked.timing.compute_stall == 0.0


def test_a_solved_schedule_simulates_the_same_with_a_link():
    graph = training_chain(20)
    schedule = solve(graph, int(simulate(graph, checkpoint_all_ops(graph)[0]).peak * 0.6), "rotor")
    linked = simulate(graph, schedule, link=LINK)
    assert linked.peak == schedule.stats["peak"] and math.isclose(linked.makespan, schedule.stats["cost"])


def test_transfer_ops_round_trip_through_the_schedule_format_and_its_schema():
    document = Schedule.from_ops(OFFLOADED, graph="three").to_json()
    jsonschema.validate(document, SCHEMA)
    assert Schedule.from_json(json.loads(json.dumps(document))).ops == tuple(OFFLOADED)
    assert set(SCHEMA["properties"]["ops"]["items"]["prefixItems"][0]["enum"]) == set(ACTIONS)


def test_a_link_needs_a_bandwidth():
    with pytest.raises(ValueError, match="positive bandwidth"):
        Link(0.0, 1.0)


def test_the_command_line_times_a_schedule_with_transfers(tmp_path):
    import subprocess
    import sys

    from remat_core import save_graph
    from remat_core.schedule import save_schedule

    save_graph(three_ops(), tmp_path / "g.json")
    save_schedule(Schedule.from_ops(OFFLOADED), tmp_path / "s.json")
    root = Path(__file__).resolve().parents[1]

    def run(*args):
        return subprocess.run([sys.executable, "-m", "remat_core", "simulate", str(tmp_path / "g.json"),
                               str(tmp_path / "s.json"), *args], capture_output=True, text=True, cwd=root)
    out = run("--bandwidth", "2,4", "--latency", "0.5")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["transfers"] == {"makespan": 7.0, "compute_stall": 3.0, "transfer_stall": 0.0,
                                                   "host_peak": 4, "bytes_to_host": 4, "bytes_to_device": 4}
    without = run()
    assert without.returncode == 1 and "--bandwidth" in without.stderr
    bad = run("--bandwidth", "fast")
    assert bad.returncode == 2 and "give a preset (pcie3" in bad.stderr and "12GB/s" in bad.stderr


def test_a_bandwidth_reads_as_bytes_per_cost_unit_a_rate_or_a_preset():
    from remat_core.schedule.links import LINK_PRESETS, parse_link

    assert parse_link("4096") == Link(4096.0, 4096.0)
    assert parse_link("1MiB,2MiB", latency=0.5, full_duplex=False) == Link(2.0 ** 20, 2.0 ** 21, 0.5, False)
    assert parse_link("12GB/s", compute_rate=1e9) == Link(12.0, 12.0)
    to_host, to_device = LINK_PRESETS["nvlink-c2c"]
    assert parse_link("NVLink-C2C", compute_rate=2.0) == Link(to_host / 2, to_device / 2)
    for bad in ("fast", "0", "1,2,3", "-5GB/s", ""):
        with pytest.raises(ValueError, match="give a preset"):
            parse_link(bad)
    with pytest.raises(ValueError, match="compute rate"):
        parse_link("pcie4", compute_rate=0)


def offloading_chain_schedule():
    from remat_core import solve
    from remat_core.graph.generators import training_chain

    graph = training_chain(8)
    return graph, solve(graph, 4, "pofo", link=Link(1.0, 0.5))


def test_the_timeline_counts_device_bytes_and_draws_the_host_and_the_lane():
    from remat_core.schedule import describe_op, memory_by_kind, occurrences
    from remat_core.viz import memory_timeline_figure, transfer_lane_figure

    graph, schedule = offloading_chain_schedule()
    result = schedule.simulation
    assert list(memory_by_kind(graph, result).total) == list(result.memory)  # offloads hold, prefetches add
    steps = {action: step for step, (action, _) in enumerate(result.ops)}
    occurrence = occurrences(result)
    assert describe_op(graph, result, steps["offload"], occurrence[steps["offload"]]).endswith("to the host")
    assert describe_op(graph, result, steps["prefetch"], occurrence[steps["prefetch"]]).endswith("from the host")
    memory = memory_timeline_figure(graph, schedule)
    host = next(t for t in memory.data if t.name == "host memory")
    assert host.y[-1] == result.timing.host_peak  # bytes, the unit of a graph this small
    lane = transfer_lane_figure(graph, schedule)
    names = [t.name for t in lane.data]
    assert names[:2] == ["to the host", "to the device"] and "compute waits" in names
    bars = next(t for t in lane.data if t.name == "to the host")
    assert len(bars.x) == sum(1 for a, _ in result.ops if a == "offload") and all(w > 0 for w in bars.x)
    waits = next(t for t in lane.data if t.name == "compute waits")
    assert len(waits.x) > 0 and "of the step" in lane.layout.title.text


def test_a_lane_needs_a_timed_schedule():
    from remat_core import solve
    from remat_core.viz import transfer_lane_figure

    graph = three_ops()
    with pytest.raises(ValueError, match="host link"):
        transfer_lane_figure(graph, solve(graph, 10**6, "rotor"))


def test_the_story_of_an_offloaded_tensor_adds_up():
    from remat_core.analysis import offload_story

    graph, schedule = offloading_chain_schedule()
    result = schedule.simulation
    moved = [node for action, node in result.ops if action == "offload"]
    stories = [offload_story(graph, schedule, node) for node in moved]
    assert all(s is not None for s in stories)
    for story in stories:
        assert story.offloaded_at < story.dropped_at < story.back_at < story.read_at
        assert story.copy_out == 1.0 and story.copy_back == 2.0  # a unit tensor at 1 out, 0.5 back
        assert 0 <= story.waited_out <= story.copy_out and 0 <= story.waited_back <= story.copy_back
        assert story.recompute_cost >= graph.node(story.tensor).cost and story.recompute_ops >= 1
        assert "offloaded at step" in story.sentence(graph)
    # every wait of the compute lane is some story's
    assert sum(s.waited_out + s.waited_back for s in stories) == pytest.approx(result.timing.compute_stall)
    assert offload_story(graph, schedule, "f8") is None


def test_compare_and_study_take_a_bandwidth(tmp_path):
    import csv
    import subprocess
    import sys

    from remat_core import save_graph
    from remat_core.graph.generators import training_chain

    save_graph(training_chain(8), tmp_path / "chain.json")
    root = Path(__file__).resolve().parents[1]

    def run(*args):
        return subprocess.run([sys.executable, "-m", "remat_core", *args], capture_output=True, text=True, cwd=root,
                              timeout=300)
    out = run("compare", str(tmp_path / "chain.json"), "--budgets", "40%,50%", "--solvers", "rotor,pofo",
              "--bandwidth", "1", "--no-lp-bound", "--no-store", "--json")
    assert out.returncode == 0, out.stderr
    rows = {(r["solver"], r["budget"]): r for r in json.loads(out.stdout)["rows"]}
    for budget in (4, 5):
        assert rows["pofo", budget]["makespan"] < rows["rotor", budget]["makespan"] == rows["rotor", budget]["cost"]
    out = run("study", str(tmp_path / "chain.json"), "--solvers", "pofo", "--budgets", "50%", "--bandwidth", "1",
              "--out", str(tmp_path / "study"), "--no-store")
    assert out.returncode == 0, out.stderr
    row, = csv.DictReader(open(tmp_path / "study" / "results.csv"))
    assert float(row["makespan"]) == 25.0  # every copy hidden (rotor alone: 32)
    bad = run("compare", str(tmp_path / "chain.json"), "--bandwidth", "fast", "--no-store")
    assert bad.returncode == 2 and "give a preset" in bad.stderr
