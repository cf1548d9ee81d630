"""Values no real model has are refused where a graph or a budget enters, naming the node and the field.

The limits (:data:`MAX_NODE_BYTES`, :data:`MAX_GRAPH_BYTES`, :data:`MAX_NODE_COST`) keep every size exact
as a double and every cost finite for the LP/MILP solvers; budgets over what any graph can hold, negative
ones and ``nan`` are refused as text. ``budget_text`` writes the shortest text that reads back exactly.
"""

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remat_core import BudgetError, ComputeGraph, GraphError, Node, parse_budget, parse_graph
from remat_core.graph import MAX_GRAPH_BYTES, MAX_NODE_BYTES, MAX_NODE_COST, budget_text, format_bytes
from remat_core.graph.budget import UNITS


def remat_graph(nodes: list[dict], edges: list[list[str]] = ()) -> bytes:
    return json.dumps({"format": "remat-graph", "version": 1, "name": "odd", "nodes": nodes,
                       "edges": list(edges)}).encode()


def node_link(mem, cost) -> bytes:
    """A Checkmate node-link file of two nodes, the first with these values."""
    return json.dumps({"directed": True, "multigraph": False, "graph": {}, "links": [{"source": 0, "target": 1}],
                       "nodes": [{"id": 0, "name": "big", "cost_ram": mem, "cost_cpu": cost},
                                 {"id": 1, "name": "b", "cost_ram": 1, "cost_cpu": 1}]}).encode()


@pytest.mark.parametrize("mem, cost, message", [
    (10**40, 1, "mem 10000000000000000000000000000000000000000 bytes is more than the"),
    (1e40, 1, "mem 1e\\+40 bytes is more than the"),
    (MAX_NODE_BYTES + 1, 1, "mem 1125899906842625 bytes is more than the 1125899906842624 \\(1 PiB\\)"),
    (1, 1e300, "cost 1e\\+300 is more than the 1e\\+18"),
    (-1, 1, "mem must be a non-negative integer"),
    (1, -1, "cost must be a non-negative finite number"),
    (float("inf"), 1, "mem must be a non-negative integer"),
    (1, float("nan"), "cost must be a non-negative finite number, got nan"),
])
def test_absurd_node_values_are_refused_naming_the_node_and_the_field(mem, cost, message):
    with pytest.raises(GraphError, match="node 'big': " + message):
        ComputeGraph([Node("big", mem, cost), Node("b", 1, 1)], [("big", "b")])
    if math.isfinite(mem) and math.isfinite(cost):  # JSON has no inf or nan
        with pytest.raises(GraphError, match="node 'big': " + message):
            parse_graph(remat_graph([{"id": "big", "mem": mem, "cost": cost}, {"id": "b", "mem": 1, "cost": 1}],
                                    [["big", "b"]]), "odd.json")
        with pytest.raises(GraphError, match="odd_nx.json: node '0': " + message):
            parse_graph(node_link(mem, cost), "odd_nx.json")


def test_values_at_the_limits_are_kept():
    graph = ComputeGraph([Node("a", MAX_NODE_BYTES, MAX_NODE_COST), Node("b", 0, 0.0)], [("a", "b")])
    assert graph.mem == (MAX_NODE_BYTES, 0) and graph.cost == (MAX_NODE_COST, 0.0)


def test_a_graph_holding_more_than_the_total_limit_is_refused_naming_its_largest_nodes():
    count = MAX_GRAPH_BYTES // MAX_NODE_BYTES + 1
    nodes = [Node(f"n{i}", MAX_NODE_BYTES, 1) for i in range(count)]
    with pytest.raises(GraphError, match=r"graph 'huge': its nodes hold .* more than the 9007199254740992 \(8 PiB\)"
                                         r".*node 'n0' mem 1125899906842624"):
        ComputeGraph(nodes, [], name="huge")
    assert len(ComputeGraph(nodes[:-1], [])) == count - 1  # exactly at the limit


def test_the_cli_refuses_an_absurd_graph_with_exit_code_2_and_the_node_named(tmp_path):
    path = tmp_path / "odd.json"
    path.write_bytes(remat_graph([{"id": "conv1", "mem": 10**40, "cost": 1}]))
    out = subprocess.run([sys.executable, "-m", "remat_core", "info", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    assert "node 'conv1': mem" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("text, message", [
    ("1e999", "more than 8 PiB"), ("99999999999999999999999TiB", "more than 8 PiB"), ("1e999999999", "more than"),
    ("9PiB", "more than 8 PiB"), ("1e20%", "more than"), ("-1", "is negative"), ("-5MiB", "is negative"),
    ("nan", "cannot read budget 'nan'"), ("inf", "cannot read budget 'inf'"), ("abc", "cannot read budget 'abc'"),
    ("", "cannot read budget ''"),
])
def test_budget_text_out_of_range_or_not_a_number_is_refused_with_what_works(text, message):
    with pytest.raises(BudgetError, match=message) as info:
        parse_budget(text, 10**9)
    assert "512MiB" in str(info.value) or "checkpoint-all peak" in str(info.value)


def test_the_largest_budget_is_read_and_zero_is_a_budget():
    assert parse_budget("8PiB") == MAX_GRAPH_BYTES and parse_budget("0") == 0
    assert format_bytes(MAX_GRAPH_BYTES) == "8 PiB"


@given(st.integers(0, MAX_GRAPH_BYTES), st.sampled_from(sorted(UNITS)))
def test_budget_text_is_the_shortest_text_that_reads_back_exactly(nbytes, unit):
    text = budget_text(nbytes, unit)
    assert parse_budget(text) == nbytes
    number = text[: len(text) - len(unit)]
    if "." in number:  # one digit fewer would read back as another number of bytes
        shorter = number[:-1].rstrip(".")
        assert parse_budget(shorter + unit) != nbytes or parse_budget(_next_up(shorter) + unit) != nbytes


def _next_up(number: str) -> str:
    """The decimal one unit of the last digit above ``number`` (``1.2`` -> ``1.3``)."""
    from decimal import Decimal
    value = Decimal(number)
    return f"{value + Decimal(1).scaleb(value.as_tuple().exponent):f}"


@pytest.mark.parametrize("nbytes, unit, text", [(3 * 2**29, "GiB", "1.5GiB"), (314572, "MiB", "0.3MiB"),
                                                (0, "MiB", "0MiB"), (2**20, "MiB", "1MiB"), (7, "B", "7B")])
def test_budget_text_examples(nbytes, unit, text):
    assert budget_text(nbytes, unit) == text


@pytest.mark.parametrize("nbytes, unit", [(-1, "MiB"), (1.5, "MiB"), (True, "B"), (10, "parsecs")])
def test_budget_text_refuses_what_is_not_a_byte_count(nbytes, unit):
    with pytest.raises(BudgetError, match="non-negative integer"):
        budget_text(nbytes, unit)
