"""The results store: keys, round trips, damaged and locked files, concurrent writers, export and prune,
and the command line and the explorer sharing it."""

import csv
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from remat_core import ComputeGraph, checkpoint_all_peak, memory_lower_bound, save_graph, solve
from remat_core.graph.generators import training_chain
from remat_core.solvers import DEFAULT_SOLVER
from remat_core.store import (FROM_STORE, ResultKey, ResultStore, StoredResult, lookup, result_key, store_path,
                              stored_solve)

ROOT = Path(__file__).resolve().parents[1]


def run(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "remat_core", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture
def graph():
    return training_chain(24, mem=1000)


@pytest.fixture
def store(tmp_path):
    opened = ResultStore(tmp_path / "results.sqlite")
    yield opened
    opened.close()


@pytest.fixture
def graph_file(tmp_path, graph):
    path = tmp_path / "chain.json"
    save_graph(graph, path)
    return path


def test_the_test_session_never_uses_the_users_cache():
    assert Path(store_path()).parent.name.startswith("remat-test-")
    assert not str(store_path()).startswith(str(Path.home() / ".cache"))


def test_default_path_is_in_the_cache_directory_and_honours_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("REMAT_STORE")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert store_path() == Path.home() / ".cache" / "remat-explorer" / "results.sqlite"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert store_path() == tmp_path / "remat-explorer" / "results.sqlite"
    assert store_path("elsewhere.sqlite") == Path("elsewhere.sqlite")
    assert store_path(disabled=True) is None
    monkeypatch.setenv("REMAT_STORE", "off")
    assert store_path() is None


def test_same_graph_same_key_and_every_choice_changes_it(graph):
    peak = checkpoint_all_peak(graph)
    key = result_key(graph, peak // 2, "rotor", 10, {})
    again = result_key(ComputeGraph.from_json(json.loads(json.dumps(graph.to_json()))), peak // 2, "rotor", 10.0)
    assert key == again and key.digest == again.digest
    # an option left out and the same option at its default are the same solve
    assert result_key(graph, peak, "chen-greedy", None, {}) == \
        result_key(graph, peak, "chen-greedy", None, {"segmentation": "auto"})
    changed = [result_key(graph, peak // 2, "dtr", 10),
               result_key(graph, peak // 2 + 1, "rotor", 10),
               result_key(graph, peak // 2, "rotor", 11),
               result_key(graph, peak // 2, "rotor", None),
               result_key(graph, peak // 2, "rotor", 10, {"segmentation": "linear"}),
               result_key(training_chain(25, mem=1000), peak // 2, "rotor", 10),
               ResultKey(key.graph_hash, key.solver, key.options, key.budget, key.time_limit, "0.0.0-other")]
    assert len({k.digest for k in changed} | {key.digest}) == len(changed) + 1


def test_a_traced_graph_and_its_file_are_keyed_apart_for_a_solver_that_reads_the_trace(store):
    """torch-partitioner runs on a traced graph's own FX graph, and on the sizes alone for the same graph read
    from its file: two answers for one content hash. The store keys the solvers that read the trace by the
    graph's mode too, so neither answer is returned for the other; other solvers share one key."""
    from remat_core.frontends.trace import trace_training_graph
    from tiny_models import small_cnn

    traced = trace_training_graph(*small_cnn())
    from_file = ComputeGraph.from_json(json.loads(json.dumps(traced.to_json())))
    assert traced.content_hash == from_file.content_hash
    assert (traced.attachments.mode, from_file.attachments.mode) == ("traced", "sizes")
    budget = checkpoint_all_peak(traced)
    assert result_key(traced, budget, "torch-partitioner") != result_key(from_file, budget, "torch-partitioner")
    assert result_key(traced, budget, "dtr") == result_key(from_file, budget, "dtr")
    first = stored_solve(traced, budget, "torch-partitioner", store=store)
    second = stored_solve(from_file, budget, "torch-partitioner", store=store)
    assert not second.from_store and store.stats()["entries"] == 2
    assert (first.schedule.solver_info["mode"], second.schedule.solver_info["mode"]) == ("traced", "sizes")
    assert stored_solve(from_file, budget, "torch-partitioner", store=store).from_store


def test_a_repeated_solve_is_the_stored_schedule_simulated_again(graph, store):
    budget = checkpoint_all_peak(graph) // 2
    first = stored_solve(graph, budget, "rotor", store=store)
    second = stored_solve(graph, budget, "rotor", store=store)
    assert not first.from_store and second.from_store
    assert second.schedule.ops == first.schedule.ops and second.schedule.reasons == first.schedule.reasons
    assert dict(second.schedule.stats) == dict(first.schedule.stats)
    assert second.schedule.simulation is not None and second.schedule.solver_info[FROM_STORE] is True
    assert second.seconds == first.seconds
    assert solve(graph, budget, "rotor").ops == second.schedule.ops
    assert store.stats()["entries"] == 1


def test_a_stored_infeasible_budget_comes_back_as_stored(graph, store):
    budget = memory_lower_bound(graph)
    fresh = stored_solve(graph, budget, "chen-sqrt", store=store)
    stored = stored_solve(graph, budget, "chen-sqrt", store=store)
    assert fresh.status == stored.status == "infeasible" and stored.from_store and not fresh.from_store
    assert stored.smallest_feasible == fresh.smallest_feasible and stored.detail == fresh.detail
    assert store.stats()["statuses"] == {"infeasible": 1}


def test_a_stored_schedule_that_no_longer_simulates_is_dropped_and_solved_again(graph, store, caplog):
    budget = checkpoint_all_peak(graph) // 2
    good = stored_solve(graph, budget, "rotor", store=store)
    key = result_key(graph, budget, "rotor")
    broken = good.schedule.to_json()
    broken["ops"] = broken["ops"][1:]  # its first compute gone: the next op reads a tensor that is not there
    store.put(key, graph.name, StoredResult("feasible", broken, seconds=1.0))
    with caplog.at_level(logging.WARNING):
        assert lookup(store, graph, key) is None
    assert "no longer simulates" in caplog.text and store.get(key) is None
    again = stored_solve(graph, budget, "rotor", store=store)
    assert not again.from_store and again.schedule.ops == good.schedule.ops


@pytest.mark.parametrize("damage", ["not a database", "truncated"])
def test_a_damaged_store_is_moved_aside_with_a_warning_and_a_new_one_started(tmp_path, graph, damage, caplog):
    path = tmp_path / "results.sqlite"
    if damage == "not a database":
        path.write_bytes(b"these are not the bytes of an SQLite database\n" * 200)
    else:
        store = ResultStore(path)
        for fraction in (0.5, 0.6, 0.7, 0.8, 0.9):
            stored_solve(graph, int(checkpoint_all_peak(graph) * fraction), "chen-sqrt", store=store)
        store.close()
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
    damaged = path.read_bytes()
    with caplog.at_level(logging.WARNING):
        store = ResultStore(path)
        outcome = stored_solve(graph, checkpoint_all_peak(graph) // 2, "rotor", store=store)
    asides = list(tmp_path.glob("results.sqlite.damaged-*"))
    assert len(asides) == 1 and asides[0].read_bytes() == damaged  # moved, never deleted
    assert str(path) in caplog.text and str(asides[0]) in caplog.text and "damaged" in caplog.text
    assert store.available and outcome.feasible and store.stats()["entries"] == 1


def test_the_cli_succeeds_on_a_damaged_store(tmp_path, graph_file):
    path = tmp_path / "results.sqlite"
    path.write_text("not a database")
    out = run("solve", graph_file, "-b", "60%", "-s", "rotor", "--store", path)
    assert out.returncode == 0, out.stderr
    assert "damaged" in out.stderr and str(path) in out.stderr and "moved to" in out.stderr
    assert list(tmp_path.glob("results.sqlite.damaged-*"))
    assert ResultStore(path).stats()["entries"] == 1


LOCK_HOLDER = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_a_locked_store_is_waited_for_then_left_with_a_warning(tmp_path, graph_file, graph):
    path = tmp_path / "results.sqlite"
    ResultStore(path).close()
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(path), "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        out = run("solve", graph_file, "-b", "60%", "-s", "rotor", "--store", path, "-o", tmp_path / "s.json")
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert out.returncode == 0, out.stderr
    assert "locked" in out.stderr and "going on without it" in out.stderr and str(path) in out.stderr
    assert waited < 45  # bounded: the busy timeout, not the 60 s the lock is held
    assert json.loads((tmp_path / "s.json").read_text())["stats"]["peak"] <= checkpoint_all_peak(graph) * 0.6


def test_four_processes_writing_one_store_at_once_all_succeed(tmp_path, graph_file, graph):
    path = tmp_path / "results.sqlite"
    budgets = ["50%", "60%", "70%", "80%"]
    procs = [subprocess.Popen([sys.executable, "-m", "remat_core", "solve", str(graph_file), "-b", b, "-s", "rotor",
                               "--store", str(path), "-o", str(tmp_path / f"{i}.json")], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, b in enumerate(budgets)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert all(code == 0 for _, _, code in results), [err for _, err, _ in results]
    assert not any("warning" in err for _, err, _ in results)
    store = ResultStore(path)
    assert store.stats()["entries"] == 4
    peak = checkpoint_all_peak(graph)
    stored = sorted(row["budget"] for row in store.rows())
    assert stored == sorted(int(peak * int(b[:-1]) / 100) for b in budgets)


def _open_at_the_barrier(path, barrier, answers):
    barrier.wait()
    opened = ResultStore(path)
    answers.put(opened.off_reason)
    opened.close()


def test_processes_creating_one_new_store_at_the_same_instant_all_open_it(tmp_path):
    """Found in CI: one process read the schema while another was creating it (taken for another program's
    database), or was refused the switch to WAL at once (SQLite's busy handler does not cover it)."""
    import multiprocessing
    context = multiprocessing.get_context("fork")
    for trial in range(12):
        barrier, answers = context.Barrier(4), context.Queue()
        workers = [context.Process(target=_open_at_the_barrier, args=(tmp_path / f"{trial}.sqlite", barrier, answers))
                   for _ in range(4)]
        for worker in workers:
            worker.start()
        reasons = [answers.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(timeout=60)
        assert reasons == [None] * 4, (trial, reasons)
        assert ResultStore(tmp_path / f"{trial}.sqlite").stats()["entries"] == 0


def test_a_killed_writer_leaves_only_whole_rows(tmp_path, graph_file):
    path = tmp_path / "results.sqlite"
    sweep = subprocess.Popen([sys.executable, "-m", "remat_core", "sweep", str(graph_file), "-s", "checkmate-milp",
                              "--points", "12", "--time-limit", "2", "--store", str(path)], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _entries(path) < 2:
        time.sleep(0.1)
    sweep.send_signal(signal.SIGKILL)
    sweep.wait()
    assert _entries(path) >= 2
    store = ResultStore(path)
    assert store.available
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    for row in store.rows():
        assert row["status"] in ("feasible", "infeasible") and row["solver"] == "checkmate-milp"
        if row["feasible"]:
            assert row["peak"] <= row["budget"] and row["cost"] > 0


def _entries(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        connection = sqlite3.connect(path, timeout=5)
        return connection.execute("SELECT count(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_stats_export_and_prune(tmp_path, graph_file, graph):
    path = tmp_path / "results.sqlite"
    assert run("compare", graph_file, "--solvers", "rotor,dtr", "--budgets", "40%,60%,90%", "--no-lp-bound",
               "--store", path).returncode == 0
    other = tmp_path / "other.json"
    save_graph(training_chain(10, mem=1000), other)
    assert run("solve", other, "-b", "100%", "--store", path, "-o", tmp_path / "s.json").returncode == 0
    stats = json.loads(run("store", "stats", "--json", "--store", path).stdout)
    assert stats["entries"] == 7 and stats["graphs"] == 2 and stats["bytes"] > 0
    assert stats["solvers"] == {DEFAULT_SOLVER: 1, "dtr": 3, "rotor": 3}

    out = run("store", "export", "--format", "csv", "-o", tmp_path / "all.csv", "--store", path)
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(open(tmp_path / "all.csv")))
    assert len(rows) == 7
    assert {"graph", "solver", "options", "budget", "feasible", "peak", "cost", "overhead", "seconds",
            "created"} <= set(rows[0])
    exported = json.loads(run("store", "export", "--format", "json", "--store", path).stdout)
    assert len(exported) == 7 and {r["graph_hash"] for r in exported} == {graph.content_hash,
                                                                           training_chain(10, mem=1000).content_hash}

    assert run("store", "prune", "--older-than", "1h", "--store", path).returncode == 0
    assert json.loads(run("store", "stats", "--json", "--store", path).stdout)["entries"] == 7
    out = run("store", "prune", "--graph", graph.content_hash[:10], "--store", path)
    assert out.returncode == 0 and "pruned 6 results" in out.stderr
    assert run("store", "prune", "--all", "--store", path).returncode == 0
    assert json.loads(run("store", "stats", "--json", "--store", path).stdout)["entries"] == 0


@pytest.mark.parametrize("args, message", [
    (["store", "prune", "--older-than", "soon"], "30d"),
    (["store", "prune", "--graph", "xyz"], "content hash"),
    (["store", "stats", "--store", "/nonexistent/results.sqlite"], "no results store at"),
])
def test_store_commands_refuse_bad_input_with_what_works(args, message):
    out = run(*args)
    assert out.returncode == 2 and message in out.stderr


def test_no_store_neither_reads_nor_writes(tmp_path, graph_file):
    path = tmp_path / "results.sqlite"
    solve_args = ["solve", graph_file, "-b", "60%", "-s", "rotor", "-o", tmp_path / "s.json"]
    assert run(*solve_args, "--store", path).returncode == 0
    out = run(*solve_args, "--no-store", env={"REMAT_STORE": path})
    assert out.returncode == 0 and "results store" not in out.stderr
    out = run(*solve_args, env={"REMAT_STORE": "off"})
    assert out.returncode == 0 and "results store" not in out.stderr
    out = run(*solve_args, env={"REMAT_STORE": path})
    assert "from the results store" in out.stderr and ResultStore(path).stats()["entries"] == 1


def test_a_solve_in_the_cli_is_read_by_the_explorer_and_the_reverse(tmp_path, graph_file, graph, monkeypatch):
    from explorer.jobs.tasks import solve_graph

    path = tmp_path / "results.sqlite"
    monkeypatch.setenv("REMAT_STORE", str(path))
    peak = checkpoint_all_peak(graph)
    out = run("solve", graph_file, "-b", "60%", "-s", "rotor", "-o", tmp_path / "cli.json")
    assert out.returncode == 0 and "from the results store" not in out.stderr
    in_app = solve_graph(graph, "rotor", int(peak * 0.6), (), None)
    assert in_app.schedule.solver_info[FROM_STORE] is True
    assert [list(op) for op in in_app.schedule.ops] == json.loads((tmp_path / "cli.json").read_text())["ops"]

    fresh = solve_graph(graph, "dtr", int(peak * 0.7), (), None)
    assert FROM_STORE not in fresh.schedule.solver_info
    out = run("solve", graph_file, "-b", "70%", "-s", "dtr", "-o", tmp_path / "cli2.json")
    assert out.returncode == 0 and "from the results store" in out.stderr
