"""compare(), sweep_budgets(), pareto_optimal() and the compare/sweep commands (through a subprocess)."""

import json
import subprocess
import sys

import pytest

from remat_core import (BudgetError, UnknownSolver, checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound,
                        save_graph, solve)
from remat_core.analysis import comparison
from remat_core.analysis.comparison import (LP_AVAILABLE, LP_INFEASIBLE, LP_REFUSED, LP_SKIPPED, compare, pareto_optimal,
                                sweep_budgets)
from remat_core.graph.budget import format_bytes
from remat_core.graph.generators import training_chain


@pytest.fixture
def chain():
    return training_chain(8, mem=100)


def test_rows_per_solver_and_budget(chain):
    peak = checkpoint_all_peak(chain)
    budgets = [peak, peak // 2]
    rows = compare(chain, budgets, ["checkpoint-all", "rotor", "dtr"])
    assert [(r.budget, r.solver) for r in rows] == [(b, s) for b in budgets for s in ("checkpoint-all", "rotor", "dtr")]
    full = rows[0]
    assert full.feasible and full.peak == peak and full.overhead == 0.0 and full.recomputed_nodes == 0
    assert full.fraction == 1.0 and full.seconds >= 0
    infeasible = rows[3]
    assert not infeasible.feasible and infeasible.peak is None and infeasible.smallest_feasible == peak
    rotor = rows[4]
    assert rotor.feasible and rotor.peak <= peak // 2 and rotor.overhead > 0 and rotor.recomputed_nodes > 0
    assert rotor.cost == solve(chain, peak // 2, "rotor").stats["cost"]
    assert rotor.solver_info["links"] == 9


def test_lp_column_is_checkmate_lp_bound(chain):
    peak, low = checkpoint_all_peak(chain), memory_lower_bound(chain)
    full, tight = (comparison.lp_lower_bound(chain, b, time_limit=20) for b in (peak, low))
    # at the checkpoint-all peak the LP's optimum is the checkpoint-all cost: no overhead
    assert full.status == LP_AVAILABLE and full.value == pytest.approx(checkpoint_all_cost(chain))
    assert full.overhead == pytest.approx(0.0, abs=1e-9)
    # at the memory lower bound it bounds the exact optimum of this order from below, and is not trivial
    milp = solve(chain, low, "checkmate-milp", time_limit=20)
    assert tight.status == LP_AVAILABLE and full.value < tight.value <= milp.stats["cost"] + 1e-6
    assert tight.overhead == pytest.approx(tight.value / checkpoint_all_cost(chain) - 1)
    below = comparison.lp_lower_bound(chain, low - 1)
    assert below.status == LP_INFEASIBLE and below.value is None and "lower bound" in below.detail
    rows = compare(chain, [low], ["checkpoint-all", "rotor"], time_limit=20)
    assert [r.lower_bound for r in rows] == [tight, tight]
    assert all(r.lower_bound.value <= r.cost + 1e-6 for r in rows if r.feasible)
    assert compare(chain, [peak], ["checkpoint-all"], lower_bound=False)[0].lower_bound.status == LP_SKIPPED


def test_lp_column_says_why_a_graph_is_too_large_for_the_lp():
    big = training_chain(260)  # 521 nodes to compute, over the LP's 500
    bound = comparison.lp_lower_bound(big, checkpoint_all_peak(big) // 2)
    assert bound.status == LP_REFUSED and bound.value is None and "moccasin" in bound.detail


def test_a_solver_that_refuses_a_large_graph_is_marked_refused_with_why(tmp_path):
    big = training_chain(210)  # 421 nodes to compute, over the MILP's 400
    row, = compare(big, [checkpoint_all_peak(big) // 2], ["checkmate-milp"], lower_bound=False)
    assert row.refused and not row.feasible and "max_nodes=400" in row.detail
    path = tmp_path / "big.json"
    save_graph(big, path)
    out = run("compare", path, "--solvers", "checkmate-milp,rotor", "--budgets", "50%", "--no-lp-bound")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert next(line for line in lines if line.startswith("checkmate-milp")).split()[4] == "refused"
    assert next(line for line in lines if line.startswith("rotor")).split()[4] == "yes"


def test_bad_arguments(chain):
    with pytest.raises(UnknownSolver):
        compare(chain, [1000], ["no-such-solver"])
    with pytest.raises(BudgetError, match="at least one budget"):
        compare(chain, [], ["checkpoint-all"])
    with pytest.raises(BudgetError, match="at least 2 points"):
        sweep_budgets(chain, 1)


def test_sweep_budgets_span_lower_bound_to_peak(chain):
    budgets = sweep_budgets(chain, 40)
    assert budgets[0] == memory_lower_bound(chain) and budgets[-1] == checkpoint_all_peak(chain)
    assert budgets == sorted(set(budgets)) and len(budgets) <= 40


def test_pareto_front(chain):
    rows = compare(chain, sweep_budgets(chain, 10), ["chen-sqrt"])
    front = pareto_optimal(rows)
    feasible = [r for r in rows if r.feasible]
    # chen-sqrt has two points: its segments and checkpoint-all; repeats of the same point are all on the front
    assert {(r.peak, r.cost) for r, p in zip(rows, front) if p} == {(r.peak, r.cost) for r in feasible}
    assert not any(p for r, p in zip(rows, front) if not r.feasible)


def test_json_rows_are_plain_data(chain):
    rows = compare(chain, [checkpoint_all_peak(chain) // 2], ["rotor", "chen-sqrt"])
    docs = json.loads(json.dumps([r.to_json() for r in rows]))
    assert docs[0]["solver"] == "rotor" and docs[0]["lower_bound"]["status"] == LP_AVAILABLE


# -- the commands ------------------------------------------------------------------------------------

def run(*args):
    return subprocess.run([sys.executable, "-m", "remat_core", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def graph_file(tmp_path, chain):
    path = tmp_path / "chain.json"
    save_graph(chain, path)
    return path


def test_compare_command_table(graph_file, chain):
    out = run("compare", graph_file, "--solvers", "checkpoint-all,rotor,dtr", "--budgets", "90%,50%")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["solver", "budget", "feasible", "peak"]
    assert sum(line.startswith("rotor") for line in lines) == 2
    refused = [line for line in lines if line.startswith("checkpoint-all") and " no " in line]
    assert refused and all(f"no (fits at {format_bytes(checkpoint_all_peak(chain))})" in line for line in refused)
    assert "checkpoint-all peak" in lines[-1]
    assert lines[0].split()[-3:] == ["gap", "LP", "bound"]


def test_compare_command_shows_the_gap_and_the_lp_bound(graph_file):
    out = run("compare", graph_file, "--solvers", "checkmate-milp,rotor", "--budgets", "50%", "--time-limit", "60")
    assert out.returncode == 0, out.stderr
    header, milp, rotor = out.stdout.splitlines()[:3]
    gap_at, bound_at = header.index("gap"), header.index("LP bound")
    assert milp.startswith("checkmate-milp") and milp[gap_at:].split()[0] == "0.00%"  # proved optimal
    assert rotor[gap_at:].split()[0] == "-"  # a heuristic proves nothing
    assert milp[bound_at:].split()[0] == rotor[bound_at:].split()[0] != "skipped"


def test_compare_command_json(graph_file, chain):
    out = run("compare", graph_file, "--solvers", "griewank,chen-greedy", "--budgets", "70%,30%", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["checkpoint_all_peak"] == checkpoint_all_peak(chain)
    assert [(r["solver"], round(r["fraction"], 2)) for r in doc["rows"]] == [
        ("griewank", 0.7), ("chen-greedy", 0.7), ("griewank", 0.3), ("chen-greedy", 0.3)]
    for r in doc["rows"]:
        assert r["feasible"] == (r["peak"] is not None)
        if r["feasible"]:
            assert r["peak"] <= r["budget"] and r["overhead"] >= 0


def test_sweep_command_json(graph_file, chain):
    out = run("sweep", graph_file, "--solver", "rotor", "--points", "6", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    points = doc["points"]
    assert len(points) == 6 and points[-1]["budget"] == checkpoint_all_peak(chain)
    assert points[-1]["overhead"] == 0.0 and points[-1]["pareto"] is True
    costs = [p["cost"] for p in points if p["feasible"]]
    assert costs == sorted(costs, reverse=True)


@pytest.mark.parametrize("args, message", [
    (["compare", "{graph}", "--solvers", "magic"], "unknown solver 'magic'"),
    (["compare", "{graph}", "--budgets", ","], "names no budget"),
    (["compare", "{graph}", "--budgets", "lots"], "cannot read budget"),
    (["sweep", "{graph}", "--solver", "rotor", "--points", "1"], "at least 2 points"),
])
def test_compare_and_sweep_bad_input(graph_file, args, message):
    out = run(*[a.format(graph=graph_file) for a in args])
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
