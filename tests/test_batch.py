"""Grids of solves on the backends (this process, a process pool, Ray) and the ``study`` command."""

import csv
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from remat_core import checkpoint_all_peak, save_graph
from remat_core.analysis import compare, sweep_budgets
from remat_core.solvers import FAILED
from remat_core.batch import (BackendError, Cell, InProcess, ProcessPool, RayCluster, compare_on, open_backend,
                              run_grid, run_study)
from remat_core.graph.generators import random_dag, training_chain
from remat_core.schedule import Schedule, checkpoint_all_ops
from remat_core.solvers import REGISTRY, register
from remat_core.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]


def figures(rows):
    return [(r.solver, r.budget, r.feasible, r.peak, r.cost, r.smallest_feasible) for r in rows]


@pytest.fixture(scope="module")
def graph():
    return training_chain(40, mem=1000)


def test_every_backend_gives_the_results_of_compare(graph, tmp_path):
    budgets = sweep_budgets(graph, 5)
    solvers = ["rotor", "dtr", "chen-sqrt"]
    expected = figures(compare(graph, budgets, solvers, lower_bound=False))
    for backend in (InProcess(), ProcessPool(2), RayCluster(2)):
        rows = compare_on(backend, None, graph, budgets, solvers, lower_bound=False)
        assert figures(rows) == expected, backend.describe()
        assert not any(r.from_store for r in rows)


def test_results_stream_into_the_store_and_a_second_run_reads_them(graph, tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    budgets = sweep_budgets(graph, 4)
    seen = []
    first = compare_on(ProcessPool(2), store, graph, budgets, ["rotor", "dtr"], lower_bound=False,
                       on_result=lambda cell, outcome: seen.append(store.stats()["entries"]))
    assert seen[-1] == len(budgets) * 2 and seen == sorted(seen)  # each result stored as it arrived
    again = compare_on(InProcess(), store, graph, budgets, ["rotor", "dtr"], lower_bound=False)
    assert figures(again) == figures(first) and all(r.from_store for r in again)


def test_a_second_compare_reads_every_figure_from_the_store_lp_bounds_included(graph, tmp_path, monkeypatch):
    """A warm store answers ``compare`` without a solve or an LP (the LP bound was solved again each time)."""
    from remat_core.batch import grid

    store = ResultStore(tmp_path / "results.sqlite")
    budgets = sweep_budgets(graph, 3)
    first = compare_on(InProcess(), store, graph, budgets, ["rotor"], time_limit=20)
    assert {r.lower_bound.status for r in first} >= {"ok"}

    def no_lp(*args, **kwargs):
        raise AssertionError("the LP bound was solved again")
    monkeypatch.setattr(grid, "lp_lower_bound", no_lp)
    again = compare_on(InProcess(), store, graph, budgets, ["rotor"], time_limit=20)
    assert [r.lower_bound for r in again] == [r.lower_bound for r in first] and all(r.from_store for r in again)
    assert any(row["solver"] == grid.LP_BOUND_ENTRY for row in store.rows())


def test_backend_arguments_are_checked():
    with pytest.raises(BackendError, match="workers"):
        open_backend("local", 0)
    with pytest.raises(BackendError, match="ray"):
        open_backend("local", 2, "127.0.0.1:6379")
    with pytest.raises(BackendError, match="unknown backend"):
        open_backend("cloud")
    assert isinstance(open_backend("local", 1), InProcess) and isinstance(open_backend("local", 3), ProcessPool)


@pytest.fixture
def broken_solver():
    """A solver with a bug below the checkpoint-all peak (registered for one test only)."""
    @register("test-broken", "raises a bug's exception below the checkpoint-all peak")
    def broken(graph, budget, *, time_limit=None):
        if budget < checkpoint_all_peak(graph):
            raise ZeroDivisionError("a bug")
        ops, reasons = checkpoint_all_ops(graph)
        return Schedule.from_ops(ops, reasons)
    yield "test-broken"
    del REGISTRY["test-broken"]


def test_a_failing_solve_is_a_row_and_the_rest_of_the_study_completes(graph, broken_solver, tmp_path):
    study = run_study([graph], ["test-broken", "rotor"], ["40%", "100%"], None, InProcess(), None)
    statuses = [(r.solver, r.budget, r.status) for r in study.rows]
    assert statuses == [("test-broken", "40%", FAILED), ("test-broken", "100%", "feasible"),
                        ("rotor", "40%", "feasible"), ("rotor", "100%", "feasible")]
    assert "ZeroDivisionError: a bug" in study.rows[0].detail and study.failures[0].internal


def test_a_study_run_twice_comes_the_second_time_from_the_store(tmp_path, graph):
    other = random_dag(30, seed=3, name="dag")
    files = []
    for g, name in ((graph, "chain.json"), (other, "dag.json")):
        save_graph(g, tmp_path / name)
        files.append(tmp_path / name)
    args = ["study", *files, "--solvers", "rotor,dtr", "--budgets", "60%,80%,100%", "--store",
            tmp_path / "results.sqlite", "--out", tmp_path / "out"]
    first = _cli(*args)
    assert first.returncode == 0, first.stderr
    assert "12/12 (0 from the store)" in first.stderr
    second = _cli(*args, "--workers", "2")
    assert second.returncode == 0, second.stderr
    assert "12/12 (12 from the store)" in second.stderr
    rows = list(csv.DictReader(open(tmp_path / "out" / "results.csv")))
    assert len(rows) == 12 and all(r["from_store"] == "True" for r in rows)
    assert {"graph", "solver", "budget", "budget_bytes", "feasible", "peak", "cost", "overhead", "seconds", "status",
            "from_store"} <= set(rows[0])
    assert [(r["graph"], r["solver"], r["budget"]) for r in rows][:3] == [(graph.name, "rotor", "60%"),
                                                                         (graph.name, "rotor", "80%"),
                                                                         (graph.name, "rotor", "100%")]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [g["graph_hash"] for g in doc["graphs"]] == [graph.content_hash, other.content_hash]
    assert len(doc["rows"]) == 12
    for name in ("training-chain-40", "dag"):
        html = (tmp_path / "out" / f"pareto-{name}.html").read_text()
        assert "rotor" in html and "dtr" in html and "plotly.min.js" in html
        graph_name = graph.name if name == "training-chain-40" else other.name
        assert f"<title>{graph_name} · Pareto curves</title>" in html
    assert (tmp_path / "out" / "plotly.min.js").exists()


def test_an_interrupted_study_resumes_to_the_full_table(tmp_path):
    graph = training_chain(100, mem=1000)
    save_graph(graph, tmp_path / "chain.json")
    store = tmp_path / "results.sqlite"
    args = [sys.executable, "-m", "remat_core", "study", str(tmp_path / "chain.json"), "--solvers",
            "checkmate-milp", "--budgets", "40%,50%,60%,70%,80%,90%", "--time-limit", "2", "--store", str(store),
            "--out", str(tmp_path / "out")]
    study = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    # the study stores each result before its progress line says so: wait on that line, not on time
    lines, two_stored = [], threading.Event()

    def read_progress():
        for line in study.stderr:
            lines.append(line)
            done = re.search(r" (\d+)/6 ", line)
            if done and int(done.group(1)) >= 2:
                two_stored.set()

    reader = threading.Thread(target=read_progress, daemon=True)
    reader.start()
    assert two_stored.wait(timeout=180), "".join(lines)
    os.killpg(study.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it
    study.wait(timeout=60)
    reader.join(timeout=10)
    err = "".join(lines)
    stored = _entries(store)
    assert study.returncode == 130, err
    assert "run the same command again to resume" in err and 2 <= stored < 6
    assert not (tmp_path / "out" / "results.csv").exists()
    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    rows = list(csv.DictReader(open(tmp_path / "out" / "results.csv")))
    assert [r["budget"] for r in rows] == ["40%", "50%", "60%", "70%", "80%", "90%"]
    assert sum(r["from_store"] == "True" for r in rows) == stored
    assert all(r["status"] in ("feasible", "infeasible") for r in rows)


def _entries(path: Path) -> int:
    try:
        return sqlite3.connect(path, timeout=5).execute("SELECT count(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "remat_core", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


@pytest.mark.slow
def test_a_ray_worker_killed_mid_task_is_retried_and_the_grid_completes(tmp_path):
    import psutil

    graph = training_chain(60, mem=1000)
    cells = [Cell(graph.content_hash, "checkmate-milp", b, 3.0) for b in sweep_budgets(graph, 6)]
    killed = []

    def kill_one_running_task():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for process in psutil.process_iter(["pid", "cmdline"]):
                cmdline = " ".join(process.info["cmdline"] or [])
                if cmdline.startswith("ray::_solve_document") and process.pid != os.getpid():
                    time.sleep(0.5)  # mid-task
                    process.kill()
                    killed.append(process.pid)
                    return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_one_running_task)
    killer.start()
    store = ResultStore(tmp_path / "results.sqlite")
    outcomes = run_grid({graph.content_hash: graph}, cells, RayCluster(2), store)
    killer.join()
    assert killed, "no Ray worker was seen running a task"
    assert len(outcomes) == len(cells) and all(o.status != FAILED for o in outcomes.values())
    local = run_grid({graph.content_hash: graph}, cells, InProcess(), None)
    assert [outcomes[c].feasible for c in cells] == [local[c].feasible for c in cells]
    assert store.stats()["entries"] == len(cells)


def test_a_study_traces_zoo_models_with_the_options_trace_takes(tmp_path):
    out = _cli("study", "mlp", "--option", "width=32", "--option", "depth=2", "--batch", "8", "--level", "module",
              "--solvers", "checkpoint-all", "--budgets", "100%", "--no-store", "--out", tmp_path / "out")
    assert out.returncode == 0, out.stderr
    names = [g["name"] for g in json.loads((tmp_path / "out" / "results.json").read_text())["graphs"]]
    assert names == ["mlp (batch_size=8, depth=2, width=32)"]
    bad = _cli("study", "mlp", "--option", "colour=red", "--solvers", "rotor", "--budgets", "90%", "--no-store",
              "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "colour" in bad.stderr


def test_the_study_pareto_page_names_its_graph_and_says_when_nothing_fits(tmp_path):
    graph = training_chain(6, mem=1000, name="nothing-fits")
    save_graph(graph, tmp_path / "g.json")
    out = _cli("study", tmp_path / "g.json", "--solvers", "checkpoint-all", "--budgets", "50%", "--no-store",
               "--out", tmp_path / "out")
    assert out.returncode == 0, out.stderr
    page = next((tmp_path / "out").glob("pareto-*.html")).read_text()
    assert "nothing-fits: cost overhead by budget (0 of 1 solves found a schedule)" in page
    assert "No solver found a schedule within any budget of this study" in page
