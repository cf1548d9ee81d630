"""The command line, through a subprocess: output, files and exit codes."""

import json
import logging
import subprocess
import sys

import pytest

from remat_core import checkpoint_all_peak, memory_lower_bound, save_graph
from remat_core.graph.generators import training_chain


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "remat_core", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.fixture
def graph_file(tmp_path):
    g = training_chain(6, mem=1000)
    path = tmp_path / "chain.json"
    save_graph(g, path)
    return g, path


def test_info(graph_file):
    g, path = graph_file
    out = run("info", path)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["nodes"] == len(g) and info["edges"] == len(g.edges)
    assert info["pinned_bytes"] == 1000
    assert info["checkpoint_all_peak"] == checkpoint_all_peak(g)
    assert info["lower_bound"] == memory_lower_bound(g)


def test_solve_prints_a_schedule_and_simulate_checks_it(graph_file, tmp_path):
    g, path = graph_file
    out = run("solve", path, "--budget", "100%")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["format"] == "remat-schedule" and doc["budget"] == checkpoint_all_peak(g)
    assert doc["stats"]["peak"] == checkpoint_all_peak(g)
    sched = tmp_path / "s.json"
    sched.write_text(out.stdout)
    sim = run("simulate", path, sched)
    assert sim.returncode == 0, sim.stderr
    report = json.loads(sim.stdout)
    assert report["valid"] is True and report["peak"] == doc["stats"]["peak"]
    assert report["computes"] == doc["stats"]["computes"] and report["recomputes"] == 0
    assert report["cost"] == doc["stats"]["cost"]


def test_solve_writes_output_file(graph_file, tmp_path):
    _, path = graph_file
    target = tmp_path / "out.json"
    out = run("solve", path, "-b", "1MiB", "--solver", "checkpoint-all", "-o", target)
    assert out.returncode == 0 and out.stdout == ""
    assert json.loads(target.read_text())["budget"] == 2**20
    assert "wrote" in out.stderr


def test_invalid_schedule_exit_1_names_the_step(graph_file, tmp_path):
    _, path = graph_file
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "remat-schedule", "version": 1, "ops": [["compute", "f1"],
                                                                               ["compute", "f3"]]}))
    out = run("simulate", path, bad)
    assert out.returncode == 1
    assert "step 1" in out.stderr and "f2" in out.stderr and "Traceback" not in out.stderr
    report = json.loads(out.stdout)
    assert report["valid"] is False and report["step"] == 1 and report["op"] == ["compute", "f3"]
    assert "'f2'" in report["reason"]


def test_simulate_with_budget(graph_file, tmp_path):
    g, path = graph_file
    sched = tmp_path / "s.json"
    run("solve", path, "-b", "100%", "-o", sched)
    assert run("simulate", path, sched, "--budget", "100%").returncode == 0
    out = run("simulate", path, sched, "--budget", "50%")
    assert out.returncode == 1 and "exceeds the budget" in out.stderr


def test_infeasible_budget_exit_3(graph_file):
    g, path = graph_file
    out = run("solve", path, "--budget", "50%", "--solver", "checkpoint-all")
    assert out.returncode == 3
    assert f"{checkpoint_all_peak(g) // 2:,}" in out.stderr and f"{checkpoint_all_peak(g):,}" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("args, message", [
    (["solve", "{graph}", "--budget", "lots"], "cannot read budget"),
    (["solve", "{graph}", "--budget", "1GiB", "--solver", "magic"], "unknown solver 'magic'"),
    (["solve", "{graph}", "--budget", "1GiB", "--option", "x=1"], "has no option 'x'"),
    (["solve", "{missing}", "--budget", "1GiB"], "graph file not found"),
    (["info", "{broken}"], "not valid JSON"),
    (["simulate", "{graph}", "{missing}"], "schedule file not found"),
    (["info", "{deep}"], "deep.json nests JSON arrays or objects too deeply"),
    (["simulate", "{graph}", "{stats_list}"], "\"stats\" must be a JSON object"),
    (["info", "{bad_shape}"], "node 'a': shape must be a list of non-negative integers"),
])
def test_bad_input_exit_2(graph_file, tmp_path, args, message):
    _, path = graph_file
    names = {"graph": path, "missing": tmp_path / "missing.json"}
    for name, text in [("broken", "{oops"), ("deep", "[" * 100_000 + "]" * 100_000),
                       ("stats_list", json.dumps({"format": "remat-schedule", "version": 1, "ops": [], "stats": []})),
                       ("bad_shape", json.dumps({"format": "remat-graph", "version": 1,
                                                 "nodes": [{"id": "a", "mem": 1, "cost": 1, "shape": [2, -1]}]}))]:
        names[name] = tmp_path / f"{name}.json"
        names[name].write_text(text)
    out = run(*[a.format(**names) for a in args])
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr


def test_an_unexpected_exception_is_an_internal_error_exit_4(graph_file, monkeypatch, capsys):
    from remat_core import cli

    def buggy(args):
        raise KeyError("a bug")

    _, path = graph_file
    monkeypatch.setitem(cli.COMMANDS, "info", (cli.COMMANDS["info"][0], buggy))
    assert cli.main(["info", str(path)]) == cli.EXIT_INTERNAL_ERROR == 4
    err = capsys.readouterr().err
    assert err.startswith("internal error: KeyError: 'a bug'\n") and "please report it" in err and "--debug" in err
    package_log = logging.getLogger("remat_core")
    level = package_log.level
    try:
        with pytest.raises(KeyError):
            cli.main(["--debug", "info", str(path)])
    finally:
        package_log.setLevel(level)  # --debug set DEBUG for this process; later tests expect the default


def test_running_out_of_memory_is_bad_input_with_what_to_make_smaller(graph_file, monkeypatch, capsys):
    from remat_core import cli

    def too_big(args):
        raise MemoryError()

    _, path = graph_file
    monkeypatch.setitem(cli.COMMANDS, "info", (cli.COMMANDS["info"][0], too_big))
    assert cli.main(["info", str(path)]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: ran out of memory; try a smaller") and "report" not in err


def test_debug_shows_traceback(graph_file):
    _, path = graph_file
    out = run("--debug", "solve", path, "--budget", "lots")
    assert out.returncode != 0 and "Traceback" in out.stderr


def test_solvers_listing():
    out = run("solvers")
    assert out.returncode == 0 and out.stdout.splitlines()[0].startswith("auto ") and "checkpoint-all" in out.stdout
    listing = json.loads(run("solvers", "--json").stdout)
    assert [entry["name"] for entry in listing[:2]] == ["auto", "checkpoint-all"]


def test_node_link_graph_through_the_cli(tmp_path):
    doc = {"directed": True, "multigraph": False, "graph": {},
           "nodes": [{"id": i, "name": f"n{i}", "cost_cpu": 1, "cost_ram": 10, "backward": i > 1} for i in range(4)],
           "links": [{"source": i, "target": i + 1} for i in range(3)]}
    path = tmp_path / "nl.json"
    path.write_text(json.dumps(doc))
    info = json.loads(run("info", path).stdout)
    assert info["nodes"] == 4 and info["pinned_bytes"] == 0 and info["checkpoint_all_peak"] == 20


@pytest.mark.parametrize("kind,heuristic", [("tree", None), ("tree", "min_fill"), ("path", None),
                                            ("path", "vertex_separation")])
def test_decompose_prints_bags_edges_width_time_and_separator_tree(graph_file, kind, heuristic):
    _, path = graph_file
    args = ["decompose", path, "--kind", kind] + (["--heuristic", heuristic] if heuristic else [])
    out = run(*args)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == kind and doc["width"] == 2 and doc["seconds"] >= 0
    assert doc["bags"] and all("x" not in bag for bag in doc["bags"])  # the pinned input is left out
    assert len(doc["edges"]) == len(doc["bags"]) - 1
    assert doc["separator_tree"]["root"] in range(len(doc["bags"]))


def test_decompose_refuses_an_unknown_heuristic(graph_file):
    _, path = graph_file
    out = run("decompose", path, "--heuristic", "bogus")
    assert out.returncode == 2 and "min_degree, min_fill, exact" in out.stderr


def test_an_error_with_no_message_reads_no_message_and_long_lines_are_cut():
    from remat_core.errors import first_line

    assert first_line(ValueError("")) == "(no message)"
    assert first_line(ValueError("first\nsecond")) == "first"
    assert first_line(ValueError("x" * 400), limit=300) == "x" * 297 + "..."


def test_generate_writes_moccasin_files_that_info_and_the_default_solver_read(tmp_path):
    path = tmp_path / "layered.json"
    out = run("generate", "80", "--seed", "2", "--format", "moccasin", "-o", path)
    assert out.returncode == 0 and "80 nodes" in out.stderr
    doc = json.loads(path.read_text())
    assert doc["graph"]["node_output_cost_tag"] == "out_cost" and "id" not in doc["nodes"][0]
    info = run("info", path)
    assert json.loads(info.stdout)["graph_kind"] == "compute DAG" and "not a training graph" in info.stderr
    solved = run("solve", path, "--budget", "85%", "--time-limit", "5")
    assert solved.returncode == 0, solved.stderr
    schedule = json.loads(solved.stdout)
    assert schedule["solver"] == "auto" and schedule["stats"]["peak"] <= schedule["budget"]
    assert run("generate", "2", "-o", tmp_path / "x.json").returncode == 2


def test_a_stopped_solve_says_so(tmp_path):
    path = tmp_path / "layered.json"
    assert run("generate", "300", "--seed", "5", "-o", path).returncode == 0
    out = run("solve", path, "--budget", "80%", "--time-limit", "2", "--solver", "checkmate-milp")
    assert out.returncode in (0, 3), out.stderr
    if out.returncode == 0:
        assert "stopped at the time limit of 2 s" in out.stderr


@pytest.mark.parametrize("flag", ["--budget", "-b"])
def test_a_negative_budget_gets_the_budgets_own_message_not_argparses(tmp_path, flag):
    path = tmp_path / "g.json"
    save_graph(training_chain(4, mem=1000), path)
    out = run("solve", path, flag, "-5%")
    assert out.returncode == 2 and "is negative" in out.stderr and "expected one argument" not in out.stderr


def test_a_bare_number_below_the_lower_bound_says_it_was_read_as_bytes(tmp_path):
    path = tmp_path / "g.json"
    save_graph(training_chain(4, mem=1000), path)
    out = run("solve", path, "--budget", "50")
    assert out.returncode == 3 and "a bare number is bytes" in out.stderr and "50%" in out.stderr


def test_a_time_limited_solve_comes_back_from_the_store(tmp_path):
    path = tmp_path / "g.json"
    save_graph(training_chain(12, mem=1000), path)
    store = tmp_path / "store.sqlite"
    args = ("solve", path, "--budget", "60%", "--solver", "rotor", "--time-limit", "10", "--store", store)
    first, again = run(*args), run(*args)
    assert first.returncode == again.returncode == 0, first.stderr
    assert "from the results store" not in first.stderr and "from the results store" in again.stderr


def test_a_search_stopped_at_its_time_limit_exits_5_not_3(tmp_path):
    from remat_core.graph.generators import random_layered
    path = tmp_path / "wide.json"
    save_graph(random_layered(120, seed=3), path)
    stopped = run("solve", path, "--budget", "68%", "--solver", "moccasin", "--time-limit", "0.05", "--no-store")
    assert stopped.returncode == 5 and "stopped at its time limit" in stopped.stderr, stopped.stderr
    proved = run("solve", path, "--budget", "1%", "--solver", "moccasin", "--no-store")  # below the bound: a proof
    assert proved.returncode == 3


def test_compare_names_the_mode_torchs_partitioner_ran_in(tmp_path):
    path = tmp_path / "g.json"
    save_graph(training_chain(6, mem=1000), path)
    out = run("compare", path, "--budgets", "100%", "--solvers", "torch-partitioner", "--no-store")
    assert out.returncode == 0, out.stderr
    assert "torch-partitioner (sizes)" in out.stdout


def test_simulate_reads_a_pofo_schedule_that_offloads_nothing_over_its_link(tmp_path):
    # over a fast link on a short chain pofo may find recomputing cheaper than copying: its schedule records
    # the link but moves nothing, and simulate must not time copies that are not there
    path = tmp_path / "chain.json"
    save_graph(training_chain(16, mem=1000), path)
    schedule = tmp_path / "pofo.json"
    solved = run("solve", str(path), "--solver", "pofo", "--budget", "50%", "--bandwidth", "12GB/s", "-o",
                 str(schedule), "--no-store")
    assert solved.returncode == 0, solved.stderr
    out = run("simulate", str(path), str(schedule))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["peak"] > 0
