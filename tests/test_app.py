"""Every page of the explorer through Streamlit's AppTest: renders, reacts, and survives bad input."""

import base64
import csv
import functools
import html
import io
import json
import re
import time
from functools import partial

import job_functions
import numpy as np
import pytest
import torch
from app_solves import solved
from hypothesis import example, given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest
from test_import import onnx_convnet
from test_pt2_safety import ATTACKS, exported_linear, with_records
from tiny_models import residual_mlp

from explorer import state
from explorer.figures.decompositions import decomposition
from explorer.jobs.lanes import solve_lane, stop_background_work
from explorer.jobs.results import (awaited_solve, best_possible, options_key, solve_key, sweep_status, tensor_check_job,
                                   tensor_check_status)
from explorer.jobs.tasks import lp_bound
from explorer.pages import PAGES
from explorer.state import learn, models, zoo
from explorer.state.models import default_model
from explorer.widgets.budget import budget_scale
from explorer.widgets.exports import comparison_records, csv_text, diff_records, graph_json
from explorer.widgets.text import percent, plain
from remat_core import (ComputeGraph, checkpoint_all_peak, get_solver, list_solvers, memory_lower_bound, parse_budget,
                        parse_graph, solve)
from remat_core.analysis.comparison import sweep_budgets
from remat_core.analysis.explain import schedule_diff
from remat_core.frontends.trace import trace_training_graph, trace_zoo_model
from remat_core.graph.budget import format_bytes
from remat_core.graph.generators import training_chain

TIMEOUT = 60


@pytest.fixture(scope="module", autouse=True)
def background_workers():
    """The explorer's worker processes, stopped after this module: their sweeps would keep the CPU
    busy for the tests that follow."""
    yield
    stop_background_work()


def app(page: str | None = None) -> AppTest:
    """The app on its default model, on ``page`` once the session's solve there has ended."""
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    if page is not None:
        solved(at.switch_page(page).run())
    return at


def texts(at: AppTest) -> list[str]:
    """Metric values and deltas, warnings and errors: what a user reads as the page's answer."""
    return ([f"{m.label}={m.value}/{m.proto.delta}" for m in at.metric] + [w.value for w in at.warning]
            + [e.value for e in at.error])


def sidebar_text(at: AppTest) -> str:
    """Every text in the sidebar, nested blocks (a fragment's writes) included."""
    def walk(node) -> list[str]:
        children = getattr(node, "children", None)
        if children is None:
            return [str(getattr(node, "value", ""))]
        return [text for child in children.values() for text in walk(child)]
    return " ".join(walk(at.sidebar))


@pytest.mark.parametrize("page", [p.path for p in PAGES])
def test_every_page_runs_on_the_default_model(page):
    at = app(page)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == next(p.title for p in PAGES if p.path == page)
    assert plain(at.session_state[state.MODEL].graph.name) in sidebar_text(at)
    assert at.session_state[state.MODEL] is default_model()


def test_moving_the_budget_slider_changes_the_metrics_and_the_sidebar():
    at = app("app_pages/schedule.py")
    slider = at.slider(key="w_budget")
    first_budget = at.session_state[state.BUDGET]
    shown = texts(solved(at))
    solved(slider.set_value(slider.max).run())
    assert not at.exception
    top_budget = at.session_state[state.BUDGET]
    assert top_budget > first_budget and texts(at) != shown
    assert any(m.label.endswith("Peak memory") for m in at.metric)
    assert f"Budget **{budget_scale_of(at).label(top_budget)}**" in sidebar_text(at)
    solved(at.slider(key="w_budget").set_value(at.slider(key="w_budget").min).run())
    assert not at.exception and texts(at) != texts_at_top(at, top_budget)


def texts_at_top(at: AppTest, budget: int) -> list[str]:
    """The page's answer at ``budget``, from a fresh session (for comparison)."""
    fresh = app()
    fresh.session_state[state.BUDGET] = budget
    fresh.switch_page("app_pages/schedule.py").run()
    return texts(solved(fresh))


def test_the_slider_goes_from_under_the_lower_bound_to_over_the_peak():
    at = app("app_pages/schedule.py")
    slider = at.slider(key="w_budget")
    graph = at.session_state[state.MODEL].graph
    assert slider.min * 2**20 < memory_lower_bound(graph) and slider.max * 2**20 > checkpoint_all_peak(graph)


def test_the_pareto_chart_switches_to_a_log_overhead_axis_and_keeps_it():
    at = app()
    at.session_state[state.MODEL] = state.Model(training_chain(10, mem=2**20), "test")
    at.session_state[state.SOLVER] = "rotor"  # a quick sweep: the axis is what is tested
    at.switch_page("app_pages/schedule.py").run()
    session = at.session_state
    sweep_status(session[state.MODEL].graph, session[state.SOLVER], (), session[state.TIME_LIMIT], wait=120)
    at.run()
    assert pareto_yaxis(at).get("type") != "log"
    at.toggle(key="w_pareto_log").set_value(True).run()
    assert not at.exception and pareto_yaxis(at)["type"] == "log" and session[state.PARETO_LOG] is True
    at.switch_page("app_pages/timeline.py").run()
    at.switch_page("app_pages/schedule.py").run()
    assert at.toggle(key="w_pareto_log").value is True and pareto_yaxis(at)["type"] == "log"


def pareto_yaxis(at: AppTest) -> dict:
    """The y axis of the Schedule page's Pareto chart."""
    return json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["yaxis"]


def test_an_infeasible_budget_names_the_smallest_feasible_one_and_offers_it():
    at = app()
    graph = training_chain(8, mem=2**20)
    at.session_state[state.MODEL] = state.Model(graph, "test")
    at.session_state[state.BUDGET] = state.default_budget(graph)
    at.session_state[state.TIME_LIMIT] = 2.0  # auto's sweep searches each budget to its limit
    at.switch_page("app_pages/schedule.py").run()
    solver, limit = at.session_state[state.SOLVER], at.session_state[state.TIME_LIMIT]
    smallest = sweep_status(graph, solver, (), limit, wait=120).curve.smallest_feasible()
    assert memory_lower_bound(graph) <= smallest < checkpoint_all_peak(graph)  # below what the solve itself knows
    solved(at.slider(key="w_budget").set_value(at.slider(key="w_budget").min).run())
    assert not at.exception and not at.metric
    warning = at.warning[0].value
    assert "infeasible" in warning
    assert f"It fits at **{format_bytes(smallest)}**" in warning
    next(b for b in at.button if b.proto.label == f"Use {format_bytes(smallest)}").click().run()
    assert at.session_state[state.BUDGET] == smallest
    assert awaited_solve(graph, smallest, solver, (), limit).schedule is not None
    at.run()
    assert not at.exception and not at.warning and not at.error
    assert {m.label: m.value for m in at.metric}["Peak memory"] == format_bytes(
        awaited_solve(graph, smallest, solver, (), limit).schedule.stats["peak"])


def test_a_typed_budget_applies_once_and_the_slider_wins_afterwards():
    at = app("app_pages/schedule.py")
    typed = budget_scale_of(at).snap(parse_budget("70%", checkpoint_all_peak(at.session_state[state.MODEL].graph)))
    at.text_input(key="w_budget_text").input("70%").run()
    assert not at.exception and at.session_state[state.BUDGET] == typed
    assert at.text_input(key="w_budget_text").value == ""  # applied, then emptied
    slider = at.slider(key="w_budget")
    assert slider.value == budget_scale_of(at).to_units(typed)
    slider.set_value(slider.max).run()
    assert at.session_state[state.BUDGET] == budget_scale_of(at).to_bytes(slider.max)
    at.run()
    assert at.session_state[state.BUDGET] == budget_scale_of(at).to_bytes(slider.max)


def test_a_bad_typed_budget_says_why_and_keeps_the_budget():
    at = app("app_pages/schedule.py")
    before = at.session_state[state.BUDGET]
    at.text_input(key="w_budget_text").input("lots").run()
    assert not at.exception and at.session_state[state.BUDGET] == before
    assert any("lots" in w.value.replace("\\", "") for w in at.warning)
    assert at.text_input(key="w_budget_text").value == "lots"


MARKDOWN_NAMES = ("![x](http://example.com/a.png)", "**bold**", "<b>tag</b>")


def every_text(at: AppTest) -> list[str]:
    """What the page renders as markdown: markdown, captions, metrics and alerts."""
    return ([m.value for m in at.markdown] + [c.value for c in at.caption] + [m.label for m in at.metric]
            + [a.value for a in [*at.error, *at.warning, *at.info, *at.success]])


def assert_shown_as_typed(at: AppTest) -> None:
    """No markdown a file could carry reaches the page unescaped."""
    for text in every_text(at):
        assert not any(name in text for name in MARKDOWN_NAMES), text


def test_node_names_that_look_like_markdown_are_shown_as_typed_on_the_why_page():
    document = training_chain(6, mem=2**20).to_json()
    for i, node in enumerate(document["nodes"]):
        node["label"] = f"{MARKDOWN_NAMES[i % len(MARKDOWN_NAMES)]} {i}"
    graph = parse_graph(json.dumps(document).encode(), "names.json")
    at = app()
    at.session_state[state.MODEL] = state.Model(graph, "test")
    at.session_state[state.BUDGET] = (memory_lower_bound(graph) + checkpoint_all_peak(graph)) // 2
    solved(at.switch_page("app_pages/why.py").run())
    assert not at.exception
    described = [m.value for m in at.markdown if "computation of" in m.value]
    assert described and any(plain(name) in text for name in MARKDOWN_NAMES for text in described)
    assert_shown_as_typed(at)


def test_a_typed_budget_that_looks_like_markdown_is_shown_as_typed():
    at = app("app_pages/schedule.py")
    at.text_input(key="w_budget_text").input(MARKDOWN_NAMES[1]).run()
    assert not at.exception and any(plain(MARKDOWN_NAMES[1]) in w.value for w in at.warning)
    assert_shown_as_typed(at)


SMALL_MLP = {"width": 8, "depth": 3, "batch": 2, "tokens": 2}


@functools.cache
def traced_residual_mlp() -> ComputeGraph:
    """A small model traced here, with its blocks."""
    return trace_training_graph(*residual_mlp(**SMALL_MLP))


def test_policies_over_blocks_are_offered_only_for_models_traced_here():
    at = app()
    graph = training_chain(8, mem=2**20)
    at.session_state[state.MODEL] = state.Model(graph, "test")
    at.switch_page("app_pages/schedule.py").run()
    policies = [s.name for s in list_solvers() if s.tags.needs_traced_model]

    def offered() -> set[str]:
        return {label.split(" · ")[0] for label in at.selectbox(key="w_solver").options}

    assert policies and not set(policies) & offered()
    assert any(plain(policies[0]) in c.value and "traced here" in c.value for c in at.caption)
    at.session_state[state.MODEL] = state.Model(traced_residual_mlp(), "test")
    at.run()
    assert set(policies) <= offered()


def test_what_users_deploy_is_drawn_on_the_pareto_chart_as_users_meet_it():
    graph, rebuild = traced_residual_mlp(), partial(trace_training_graph, *residual_mlp(**SMALL_MLP))
    at = app()
    at.session_state[state.MODEL] = state.Model(graph, "test", rebuild=rebuild)
    at.session_state[state.TIME_LIMIT] = 1.0
    at.session_state[state.SOLVER] = "checkpoint-all"  # a quick sweep: the peers are what is tested
    at.switch_page("app_pages/schedule.py").run()
    sweep_status(graph, at.session_state[state.SOLVER], (), 1.0, wait=120)  # the chart is drawn
    at.run()
    at.toggle(key="w_pareto_deployed").set_value(True).run()
    assert not at.exception
    for peer in ("hf-checkpointing", "torchtitan-sac"):
        sweep_status(graph, peer, (), 1.0, wait=120)
    at.run()
    traces = {t["name"]: t for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]}
    every_n = traces["hf-checkpointing (fixed policy)"]
    assert every_n["marker"]["symbol"] == "diamond" and every_n["text"][0] == "every=1"
    assert "torchtitan-sac (fixed policy)" in traces
    assert any("Simulated, every mark" in c.value and "Measured" in c.value for c in at.caption)


def budget_scale_of(at: AppTest):
    """The Schedule page's slider scale for the session's model."""
    graph = at.session_state[state.MODEL].graph
    return budget_scale(memory_lower_bound(graph), checkpoint_all_peak(graph))


@pytest.mark.parametrize("solver", [s.name for s in list_solvers()])
def test_switching_solver_works(solver):
    at = app()
    # A small graph and a short time limit: every solver's background sweep stays cheap (a policy over a
    # model's blocks gets a small model traced here, at its checkpoint-all peak: SAC's plans keep every block's
    # input, a fixed policy follows no budget).
    spec = get_solver(solver)
    if spec.tags.needs_traced_model:
        graph, rebuild = traced_residual_mlp(), partial(trace_training_graph, *residual_mlp(**SMALL_MLP))
    else:
        graph, rebuild = training_chain(8, mem=2**20), None
    at.session_state[state.MODEL] = state.Model(graph, "test", rebuild=rebuild)
    at.session_state[state.BUDGET] = checkpoint_all_peak(graph) if spec.tags.needs_traced_model else \
        state.default_budget(graph)
    # (a search gets more: the sweeps of the solvers tested before it may still hold the CPU, and a search
    # stopped at its limit shows no metrics)
    limit = 10.0 if get_solver(solver).tags.searching else 1.0
    at.session_state[state.TIME_LIMIT] = limit
    at.switch_page("app_pages/schedule.py").run()
    at.selectbox(key="w_solver").set_value(solver).run()
    assert not at.exception, at.exception
    assert at.session_state[state.SOLVER] == solver and plain(solver) in sidebar_text(at)
    outcome = awaited_solve(graph, at.session_state[state.BUDGET], solver, (), limit)  # the exact solve, waited for
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    if solver in ("checkpoint-all", "torch-partitioner"):
        # Neither gets under the checkpoint-all peak of a chain (torch's partitioner recomputes what it drops in
        # one go in the backward): infeasible, and each says where it fits
        assert outcome.schedule is None and not at.metric
        warning = at.warning[0].value  # where it fits once its sweep confirmed it, else where it says it fits
        assert f"fits at **{format_bytes(checkpoint_all_peak(graph))}**" in warning or \
            f"it names **{format_bytes(checkpoint_all_peak(graph))}** as feasible" in warning
    else:
        metrics = {m.label: m.value for m in at.metric}
        for _ in range(5):  # on a busy machine a run may still show the sweep's estimate (≈): look again
            if "Peak memory" in metrics:
                break
            metrics = {m.label: m.value for m in at.run().metric}
        assert "Peak memory" in metrics, (outcome.status, outcome.detail, list(metrics), [w.value for w in at.warning])
        assert metrics["Peak memory"] == format_bytes(outcome.schedule.stats["peak"])
        assert metrics["Cost overhead"] == percent(outcome.schedule.stats["overhead"])
    at.switch_page("app_pages/timeline.py").run()
    assert not at.exception and not at.error and at.session_state[state.SOLVER] == solver


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="w_upload").set_value((name, data, "application/octet-stream")).run()
    return at


def damaged_pt2() -> bytes:
    """An export missing its weights table: torch.export.load fails on it with an AssertionError."""
    return with_records(exported_linear(), {"data/weights/model_weights_config.json": None})


def malicious_pt2(marker) -> bytes:
    """An export whose sample inputs are a pickle that would create ``marker`` if it were loaded."""
    archive = exported_linear()
    return with_records(archive, ATTACKS[0](archive, marker))


@pytest.mark.parametrize("name, data, message", [
    ("broken.json", b"{not json", "not valid JSON"),
    ("cycle.json", json.dumps({"format": "remat-graph", "version": 1, "nodes": [
        {"id": "a", "mem": 1, "cost": 1}, {"id": "b", "mem": 1, "cost": 1}], "edges": [["a", "b"], ["b", "a"]]}
    ).encode(), "cycle"),
    ("model.pkl", b"\x80\x04K\x01.", "not read here"),
    ("empty.json", b"{}", "unrecognised graph document"),
    ("junk.onnx", b"\x08\x07not a protobuf", "not an ONNX model"),
    ("damaged.pt2", damaged_pt2(), "not a loadable torch.export program"),
])
def test_a_bad_upload_shows_an_error_and_keeps_the_model(name, data, message):
    at = app("app_pages/model.py")
    before = at.session_state[state.MODEL]
    upload(at, name, data)
    assert not at.exception
    assert at.error and message in at.error[0].value.replace("\\", "")
    assert at.session_state[state.MODEL] is before
    at.run()  # the message stays while the file does, and nothing is reloaded
    assert at.error and at.session_state[state.MODEL] is before


def test_a_malicious_pt2_upload_is_refused_and_nothing_in_it_runs(tmp_path):
    at = app("app_pages/model.py")
    before = at.session_state[state.MODEL]
    upload(at, "evil.pt2", malicious_pt2(tmp_path / "ran"))
    assert not at.exception and "refused by the safe .pt2 loader" in at.error[0].value.replace("\\", "")
    assert at.session_state[state.MODEL] is before and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("name, loader, failure, message", [
    ("model.onnx", "parse_graph", MemoryError(), "ran out of memory"),
    ("model.pt2", "parse_pt2", RuntimeError("an aten op failed"), "unexpected RuntimeError (an aten op failed)"),
])
def test_an_upload_failing_in_any_other_way_shows_an_error_and_keeps_the_model(monkeypatch, name, loader, failure,
                                                                               message):
    def fail(*args, **kwargs):
        raise failure
    monkeypatch.setattr(models, loader, fail)
    at = app("app_pages/model.py")
    before = at.session_state[state.MODEL]
    upload(at, name, b"contents")
    assert not at.exception
    assert at.error and message in at.error[0].value.replace("\\", "")
    assert at.session_state[state.MODEL] is before


def test_a_zoo_model_failing_to_trace_in_any_way_shows_an_error_and_keeps_the_model(monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("tracer crashed")
    monkeypatch.setattr(zoo, "trace_zoo_model", fail)
    at = app("app_pages/model.py")
    before = at.session_state[state.MODEL]
    at.selectbox(key="w_zoo_model").set_value("mlp").run()
    at.number_input(key="w_zoo_mlp_batch_size").set_value(7)  # a trace no other test has cached
    next(b for b in at.button if b.proto.label == "Trace this model").click().run()
    assert not at.exception
    assert at.error and "unexpected RuntimeError (tracer crashed)" in at.error[0].value.replace("\\", "")
    assert at.session_state[state.MODEL] is before


def test_a_file_over_the_size_limit_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(models, "MAX_UPLOAD_BYTES", 1024)
    at = app("app_pages/model.py")
    before = at.session_state[state.MODEL]
    upload(at, "big.json", json.dumps(training_chain(40).to_json()).encode())
    assert at.error and "more than the 1 KiB" in at.error[0].value.replace("\\", "")
    assert at.session_state[state.MODEL] is before


def test_a_good_upload_becomes_the_model_and_resets_the_budget():
    at = app("app_pages/model.py")
    graph = training_chain(7, mem=2**20, name="uploaded-chain")
    upload(at, "mine.json", json.dumps(graph.to_json()).encode())
    assert not at.exception and not at.error
    model = at.session_state[state.MODEL]
    assert model.graph.content_hash == graph.content_hash and model.origin == "uploaded: mine.json"
    assert at.session_state[state.BUDGET] == state.default_budget(graph)
    assert plain("uploaded-chain") in sidebar_text(at)


def test_generating_a_graph_replaces_the_model():
    at = app("app_pages/model.py")
    at.radio(key="w_generated_family").set_value("Random DAG").run()
    at.number_input(key="w_generated_nodes").set_value(40)
    next(b for b in at.button if b.proto.label == "Use this graph").click().run()
    assert not at.exception
    assert at.session_state[state.MODEL].graph.name.startswith("random-dag-40")
    assert plain(at.session_state[state.MODEL].graph.name) in sidebar_text(at)


def test_the_timeline_page_shows_what_is_resident_at_a_step():
    at = app()
    at.session_state[state.BUDGET] = 10**12
    solved(at.switch_page("app_pages/timeline.py").run())
    assert not at.exception
    frames = json.loads(at.get("plotly_chart")[0].proto.spec)["frames"]
    assert frames
    at.number_input(key="w_timeline_step").set_value(0).run()
    assert not at.exception
    resident = at.dataframe[0].value
    graph = at.session_state[state.MODEL].graph
    assert len(resident) == sum(graph.pinned) + 1  # the pinned tensors and the first activation


def current_solve_key(at: AppTest) -> tuple:
    session = at.session_state
    solver = session[state.SOLVER]
    return solve_key(session[state.MODEL].graph, session[state.BUDGET], solver,
                     options_key(session[state.OPTIONS].get(solver, {})), session[state.TIME_LIMIT])


def plotly_values(values) -> np.ndarray:
    """An array of a plotly spec: a list, or plotly's typed array (``{"dtype", "bdata"}``, base64)."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
    return np.asarray(values)


def run_button(at: AppTest):
    return next(b for b in at.button if b.proto.label == "Run on real tensors")


def test_the_timeline_runs_the_schedule_on_real_tensors_and_overlays_the_real_memory():
    at = app("app_pages/timeline.py")
    assert not run_button(at).disabled
    run_button(at).click().run()
    assert not at.exception and not at.error
    started, check, error = tensor_check_status(current_solve_key(at), wait=300)
    assert started and error is None
    assert check.gradients_match and check.measured_peak == check.simulated_peak
    at.run()
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Gradients"] == "match"
    assert metrics["Measured peak"] == metrics["Simulated peak"] == format_bytes(check.measured_peak)
    timeline = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
    measured = next(t for t in timeline if t.get("name") == "measured")
    steps = plotly_values(measured["x"]).astype(int)
    assert len(steps) == len(check.measured_memory)  # every step drawn (a few hundred ops)
    assert np.allclose(plotly_values(measured["y"]) * 2**20, np.asarray(check.measured_memory)[steps])
    at.switch_page("app_pages/why.py").run()
    at.switch_page("app_pages/timeline.py").run()  # the result belongs to the solve: still there
    assert {m.label for m in at.metric} >= {"Gradients", "Measured peak"}


def test_a_failed_run_on_real_tensors_says_why_and_keeps_the_model_and_the_schedule():
    graph = trace_zoo_model("mlp", 2, level="op", depth=1, width=16)
    # Its rebuild traces another batch size: not the graph the schedule is for, so the worker refuses it.
    model = state.Model(graph, "test", rebuild=partial(trace_zoo_model, "mlp", 3, level="op", depth=1, width=16))
    at = app()
    at.session_state[state.MODEL] = model
    at.session_state[state.BUDGET] = state.default_budget(graph)
    solved(at.switch_page("app_pages/timeline.py").run())
    budget, solver = at.session_state[state.BUDGET], at.session_state[state.SOLVER]
    run_button(at).click().run()
    _, check, error = tensor_check_status(current_solve_key(at), wait=300)
    assert check is None and "differs" in error
    at.run()
    assert not at.exception and at.error and "The run on real tensors failed" in at.error[0].value
    assert at.session_state[state.MODEL] is model and at.session_state[state.BUDGET] == budget
    assert at.session_state[state.SOLVER] == solver and at.get("plotly_chart")  # the timeline is still drawn
    failed = tensor_check_job(current_solve_key(at))
    run_button(at).click().run()  # pressing again retries a failed run
    _, check, error = tensor_check_status(current_solve_key(at), wait=300)
    assert tensor_check_job(current_solve_key(at)) is not failed and check is None and "differs" in error


def test_a_graph_read_from_a_file_cannot_run_on_real_tensors():
    at = app("app_pages/model.py")
    upload(at, "mine.json", json.dumps(training_chain(7, mem=2**20).to_json()).encode())
    solved(at.switch_page("app_pages/timeline.py").run())
    assert not at.exception and run_button(at).disabled
    assert any("No model behind this graph" in c.value for c in at.caption)
    assert tensor_check_status(current_solve_key(at)) == (False, None, None)


def test_the_learn_page_steps_forward():
    at = app("app_pages/learn.py")
    first = at.session_state[learn.STEP]
    next_button = next(b for b in at.button if "Next" in b.proto.label)
    next_button.click().run()
    assert not at.exception and at.session_state[learn.STEP] == first + 1


@given(st.integers(0, 2**44), st.integers(0, 2**44))
@example(0, 400 * 2**30 + 2)  # two bytes over a step at 400 GiB: lost to rounding once
def test_budget_scale_brackets_the_marks_with_float_steps(a, b):
    lower, peak = min(a, b), max(a, b)
    scale = budget_scale(lower, peak)
    assert all(isinstance(v, float) for v in (scale.low, scale.high, scale.step))
    assert scale.low * scale.unit.size <= lower and scale.high * scale.unit.size >= peak
    assert scale.low < scale.high
    for nbytes in (lower, peak, (lower + peak) // 2):
        shown = scale.to_units(nbytes)
        assert scale.low <= shown <= scale.high
        assert scale.to_bytes(shown) >= min(nbytes, scale.to_bytes(scale.high)) - 1


def lifetime_rows_shown(at: AppTest) -> list[str]:
    """The lifetime chart's row labels, top to bottom."""
    chart = next(c for c in at.get("plotly_chart") if "timeline_lifetimes" in c.proto.id)
    spec = json.loads(chart.proto.spec)
    return list(reversed(spec["layout"]["yaxis"]["categoryarray"]))


def test_the_lifetime_chart_shows_the_rows_asked_for():
    at = app("app_pages/timeline.py")
    model = at.session_state[state.MODEL]
    assert len(lifetime_rows_shown(at)) == 60 < len(model.graph)
    at.number_input(key="w_lifetime_rows").set_value(20).run()
    assert len(lifetime_rows_shown(at)) == 20
    at.selectbox(key="w_lifetime_module").set_value("layer2").run()
    assert not at.exception and lifetime_rows_shown(at)
    assert all(label.startswith("layer2.") for label in lifetime_rows_shown(at))
    at.selectbox(key="w_lifetime_module").set_value(None).run()
    at.segmented_control(key="w_lifetime_show").set_value("recomputed").run()
    recomputed = [n for n, c in awaited_solve(model.graph, at.session_state[state.BUDGET],
                                              at.session_state[state.SOLVER], (), at.session_state[state.TIME_LIMIT])
                  .schedule.simulation.compute_counts.items() if c > 1]
    assert not at.exception and len(lifetime_rows_shown(at)) == min(20, len(recomputed)) > 0
    assert any(f"of {len(recomputed):,} tensors" in c.value for c in at.caption)


def test_explain_on_the_timeline_opens_the_why_page_on_that_tensor():
    at = app("app_pages/timeline.py")
    picker = at.selectbox(key="w_timeline_why")
    tensor = picker.options and picker.value
    assert tensor, "the default model's default schedule should recompute something"
    next(b for b in at.button if b.proto.label == "Explain").click().run()
    assert not at.exception and at.title[0].value == "Why recomputed?"
    assert at.session_state[state.WHY_TENSOR] == tensor == at.selectbox(key="w_why_tensor").value
    assert at.metric[0].label == "Computed" and int(at.metric[0].value.rstrip("×")) >= 2
    assert any("computation" in m.value for m in at.markdown)


def test_tracing_a_zoo_model_from_the_model_page():
    at = app("app_pages/model.py")
    at.selectbox(key="w_zoo_model").set_value("mlp").run()
    at.number_input(key="w_zoo_mlp_batch_size").set_value(2)
    at.number_input(key="w_zoo_mlp_depth").set_value(1)
    at.number_input(key="w_zoo_mlp_width").set_value(16)
    next(b for b in at.button if b.proto.label == "Trace this model").click().run()
    assert not at.exception and not at.error
    model = at.session_state[state.MODEL]
    assert model.origin.startswith("zoo: mlp") and model.parameters == 784 * 16 + 16 + 16 * 10 + 10
    assert {"param", "forward", "backward"} <= {n.kind for n in model.graph.nodes}


def test_tracing_a_gnn_from_the_model_page_and_running_its_plan():
    at = app("app_pages/model.py")
    at.selectbox(key="w_zoo_model").set_value("gat").run()
    at.number_input(key="w_zoo_gat_batch_size").set_value(300)
    at.number_input(key="w_zoo_gat_width").set_value(16)
    next(b for b in at.button if b.proto.label == "Trace this model").click().run()
    assert not at.exception and not at.error
    model = at.session_state[state.MODEL]
    assert model.origin.startswith("zoo: gat") and {"param", "forward", "backward"} <= {n.kind for n in
                                                                                       model.graph.nodes}
    solved(at.switch_page("app_pages/timeline.py").run())
    run_button(at).click().run()
    _, check, error = tensor_check_status(current_solve_key(at), wait=300)
    assert error is None and check.gradients_match


def test_an_onnx_upload_gets_its_backward_pass():
    at = app("app_pages/model.py")
    upload(at, "convnet.onnx", onnx_convnet())
    assert not at.exception and not at.error
    model = at.session_state[state.MODEL]
    assert model.origin == "uploaded: convnet.onnx (forward only: backward pass added)"
    assert any(n.kind == "backward" for n in model.graph.nodes)


def test_a_pt2_export_is_traced_not_executed_as_code():
    buffer = io.BytesIO()
    torch.export.save(torch.export.export(torch.nn.Linear(4, 3), (torch.randn(2, 4),)), buffer)
    at = app("app_pages/model.py")
    upload(at, "linear.pt2", buffer.getvalue())
    assert not at.exception and not at.error
    graph = at.session_state[state.MODEL].graph
    assert {"param", "forward", "backward"} <= {n.kind for n in graph.nodes}
    solved(at.switch_page("app_pages/timeline.py").run())  # a .pt2 holds the weights: its schedules run on real tensors
    run_button(at).click().run()
    _, check, error = tensor_check_status(current_solve_key(at), wait=300)
    assert error is None and check.gradients_match


def test_best_possible_line_bounds_the_solvers_from_below():
    graph = training_chain(6, mem=10)
    assert isinstance(best_possible(graph, 10.0), list)  # the LPs run in the sweep worker, queued
    bounds = {}
    for budget in sweep_budgets(graph, 6):
        bounds[budget] = overhead = lp_bound(graph, budget, 10.0)  # what the worker's job computes, run here
        assert overhead is not None and overhead >= -1e-9
        for solver in ("checkpoint-all", "dtr", "checkmate-lp"):
            outcome = awaited_solve(graph, budget, solver, (), 10.0)
            if outcome.schedule is not None:
                assert overhead <= outcome.schedule.stats["overhead"] + 1e-9
    ordered = [bounds[b] for b in sorted(bounds)]
    assert ordered == sorted(ordered, reverse=True)  # more memory never raises the bound
    assert ordered[-1] == pytest.approx(0.0, abs=1e-9) and ordered[0] > 0  # checkpoint-all fits at the peak only


def test_the_comparison_table_has_a_mip_gap_column_when_a_solver_reports_one():
    at = app()
    graph = training_chain(8, mem=2**20)
    at.session_state[state.MODEL] = state.Model(graph, "test")
    at.session_state[state.BUDGET] = state.default_budget(graph)
    at.session_state[state.TIME_LIMIT] = 5.0
    at.switch_page("app_pages/schedule.py").run()
    at.selectbox(key="w_solver").set_value("dtr").run()  # a heuristic: no bound, no gap
    at.multiselect(key="w_compare").set_value(["checkmate-milp"]).run()
    budget = at.session_state[state.BUDGET]
    for solver in (at.session_state[state.SOLVER], "checkmate-milp"):
        awaited_solve(graph, budget, solver, (), 5.0)  # wait for both exact results
    at.run()
    assert not at.exception
    table = comparison_table_rows(at)
    gaps = {row["solver"]: row["MIP gap"] for row in table}
    assert gaps == {at.session_state[state.SOLVER]: ("—", f"{at.session_state[state.SOLVER]} is a heuristic: it "
                                                           f"proves no bound, so it reports no gap"),
                    "checkmate-milp": ("0% (optimal)", None)}
    at.multiselect(key="w_compare").set_value(["lru"]).run()
    awaited_solve(graph, budget, "lru", (), 5.0)
    at.run()
    assert "MIP gap" not in comparison_table_rows(at)[0]


def comparison_table_rows(at: AppTest) -> list[dict]:
    """The Schedule page's comparison table: per row, the solver's name and each other column's (text, tooltip)."""
    table = next(m.value for m in at.markdown if 'class="remat-table"' in m.value)
    header = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", table)
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1]):
        cells = [(text, html.unescape(title) if title else None)
                 for title, text in re.findall(r'<td(?: title="([^"]*)")?[^>]*>(.*?)</td>', row)]
        rows.append({name: cell[0] if name == "solver" else cell for name, cell in zip(header, cells)})
    return rows


def download_labels(at: AppTest) -> set[str]:
    return {b.label for b in at.download_button}


def test_the_schedule_page_exports_the_sweep_and_the_comparison_at_the_budget_apart():
    at = app()
    graph = training_chain(8, mem=2**20)
    at.session_state[state.MODEL] = state.Model(graph, "test")
    at.session_state[state.BUDGET] = budget = state.default_budget(graph)
    at.switch_page("app_pages/schedule.py").run()
    solver, limit = at.session_state[state.SOLVER], at.session_state[state.TIME_LIMIT]
    sweep_status(graph, solver, (), limit, wait=120)
    outcomes = {name: awaited_solve(graph, budget, name, (), limit) for name in (solver, "checkpoint-all")}
    at.run()
    assert download_labels(at) == {"Schedule JSON", "Pareto sweep CSV"}  # one solver: no comparison table
    at.multiselect(key="w_compare").set_value(["checkpoint-all"]).run()
    assert not at.exception and download_labels(at) == {"Schedule JSON", "Pareto sweep CSV",
                                                        "Comparison at this budget CSV"}
    rows = list(csv.DictReader(io.StringIO(csv_text(comparison_records(outcomes, budget)))))
    assert [(r["solver"], r["status"]) for r in rows] == [(solver, "solved"), ("checkpoint-all", "infeasible")]
    assert int(rows[0]["peak_bytes"]) == outcomes[solver].schedule.stats["peak"] <= int(rows[0]["budget_bytes"])
    assert int(rows[1]["smallest_feasible_bytes"]) == checkpoint_all_peak(graph)


def test_the_graph_page_exports_the_graph_and_both_decompositions():
    at = app("app_pages/graph.py")
    assert not at.exception
    assert download_labels(at) == {"Graph JSON", "Tree decomposition JSON", "Path decomposition JSON"}
    graph = at.session_state[state.MODEL].graph
    assert json.loads(graph_json(graph.content_hash, graph)) == graph.to_json()
    tree, separators = decomposition(graph.content_hash, graph, "tree", "min_degree")
    document = json.loads(json.dumps(tree.to_json(separators)))
    assert document["format"] == "remat-decomposition" and document["separator_tree"]["root"] == separators.root


def test_the_why_page_exports_the_two_budget_comparison():
    at = app("app_pages/why.py")
    assert not at.exception and "Comparison CSV" in download_labels(at)
    graph = at.session_state[state.MODEL].graph
    solver, limit = at.session_state[state.SOLVER], at.session_state[state.TIME_LIMIT]
    budget = at.session_state[state.BUDGET]
    other = budget_scale_of(at).to_bytes(at.slider(key="w_why_other_budget").value)
    changes = schedule_diff(graph, awaited_solve(graph, budget, solver, (), limit).schedule,
                            awaited_solve(graph, other, solver, (), limit).schedule)
    rows = list(csv.DictReader(io.StringIO(csv_text(diff_records(graph, changes, budget, other)))))
    assert len(rows) == len(changes) > 0
    assert {(r["tensor"], int(r["computed_at_a"]), int(r["computed_at_b"])) for r in rows} == {
        (c.tensor, c.computes_a, c.computes_b) for c in changes}


def test_the_why_page_says_why_a_deployed_policy_recomputes_a_tensor_the_session_solver_keeps():
    graph, rebuild = traced_residual_mlp(), partial(trace_training_graph, *residual_mlp(**SMALL_MLP))
    hf = solve(graph, checkpoint_all_peak(graph), "hf-checkpointing")
    budget = hf.stats["peak"]
    recomputed_by_hf = next(n for n, c in hf.simulation.compute_counts.items() if c > 1)
    at = app()
    at.session_state[state.MODEL] = state.Model(graph, "test", rebuild=rebuild)
    at.session_state[state.SOLVER] = "checkpoint-all"  # keeps everything: HF's recomputations are all "kept by A"
    at.session_state[state.BUDGET] = checkpoint_all_peak(graph)
    at.session_state[state.WHY_TENSOR] = recomputed_by_hf
    at.switch_page("app_pages/why.py").run()
    for _ in range(60):
        if at.exception or any(plain("hf-checkpointing") + "**" in m.value for m in at.markdown):
            break
        time.sleep(0.5)
        at.run()
    assert not at.exception and at.selectbox(key="w_why_rival").value == "hf-checkpointing"
    said = next(m.value for m in at.markdown if plain("hf-checkpointing") + "**" in m.value)
    assert f"**{plain('checkpoint-all')}** computes" in said and "1×" in said and "2×" in said
    assert plain("recomputed by hf-checkpointing") in said and budget <= checkpoint_all_peak(graph)
    assert "Comparison CSV" in download_labels(at)  # solver B's (budget B is A: nothing differs there)


def test_the_slider_marks_use_the_colours_of_the_pareto_chart_lines():
    at = app()
    graph = training_chain(8, mem=2**20)
    at.session_state[state.MODEL] = state.Model(graph, "test")
    at.switch_page("app_pages/schedule.py").run()
    sweep_status(graph, at.session_state[state.SOLVER], (), at.session_state[state.TIME_LIMIT], wait=120)
    at.run()
    marks = next(m.value for m in at.markdown if "checkpoint-all peak" in m.value)
    mark_colours = dict((text, colour) for colour, text in re.findall(r"color:(#\w+);[^>]*>▲ ([a-z -]+) ", marks))
    lines = {s["name"]: s["line"]["color"] for s in json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["shapes"]
             if s["type"] == "line"}
    assert mark_colours == {"lower bound": lines["lower bound"], "checkpoint-all peak": lines["checkpoint-all peak"]}
    assert lines["budget"] not in mark_colours.values()


@pytest.mark.parametrize("page, drawn", [("app_pages/timeline.py", "plotly_chart"), ("app_pages/why.py", "metric")])
def test_a_solve_still_queued_is_shown_as_a_job_and_the_page_draws_it_once_done(page, drawn):
    at = app()
    graph = training_chain(9 + len(page), mem=2**20)  # a graph of its own: no solve of it is kept yet
    at.session_state[state.MODEL] = state.Model(graph, "test")
    at.session_state[state.BUDGET] = budget = state.default_budget(graph)
    lane = solve_lane(at.session_state[state.SOLVER])
    blocker = lane.submit(("busy", page), job_functions.forever)  # the solve waits behind this
    try:
        at.switch_page(page).run()
        assert not at.exception and not at.error and not at.get(drawn)
        assert any("queued behind other work" in c.value for c in at.caption)
        assert any(b.proto.label == "Cancel" for b in at.button)
        assert plain(at.session_state[state.MODEL].graph.name) in sidebar_text(at)  # the app around it still works
    finally:
        lane.cancel(blocker)
    solver, limit = at.session_state[state.SOLVER], at.session_state[state.TIME_LIMIT]
    assert awaited_solve(graph, budget, solver, (), limit).schedule is not None
    at.run()
    assert not at.exception and not any("queued" in c.value for c in at.caption)
    assert at.get(drawn)


def test_the_timeline_maps_the_schedule_into_the_allocators_segments_and_reads_its_settings():
    at = app("app_pages/timeline.py")
    assert not at.exception
    memory_map = next(c for c in at.get("plotly_chart") if "timeline_memory_map" in c.proto.id)
    spec = json.loads(memory_map.proto.spec)
    assert any(t.get("name") == "block" and t.get("customdata") for t in spec["data"])
    caption = " ".join(c.value for c in at.caption)
    assert "caching allocator" in caption and "reserves" in caption
    at.text_input(key="w_allocator").input("expandable_segments:True").run()
    assert not at.exception and not at.warning
    assert "expandable_segments:True" in " ".join(c.value for c in at.caption).replace("\\", "")
    at.text_input(key="w_allocator").input("max_split_size_mb:3").run()  # below PyTorch's 20: said, defaults used
    assert not at.exception and ">= 20" in at.warning[0].value
    assert any("timeline_memory_map" in c.proto.id for c in at.get("plotly_chart"))


def test_the_model_page_shows_what_kernels_hold_while_they_run():
    at = app("app_pages/model.py")
    assert not at.exception
    assert any("What kernels hold while they run" in m.value for m in at.markdown)
    table = next(d for d in at.dataframe if "temporaries" in d.value.columns)
    assert len(table.value) > 0


@pytest.mark.parametrize("solver", ["auto", "rotor"])
def test_the_why_pages_threshold_is_found_in_the_background_and_its_button_sets_the_budget(solver):
    """"Set the budget" existed only in the rerun where "Find it" ran (a click reran the page without it), and
    "Find it" blocked the page. Now the search is a job: the page shows its progress, then the threshold, and
    the button works on the rerun after it, with a searching solver (auto) and a quick one (rotor)."""
    from explorer.jobs.results import once_threshold_job

    graph = training_chain(12 + len(solver), mem=2**20)
    at = app()
    at.session_state[state.MODEL] = state.Model(graph, "test")
    at.session_state[state.SOLVER] = solver
    at.session_state[state.TIME_LIMIT] = 0.5  # auto searches each budget to its limit: a short one
    at.session_state[state.BUDGET] = budget = state.default_budget(graph)
    solved(at.switch_page("app_pages/why.py").run())
    assert not at.exception
    tensor, limit = at.session_state[state.WHY_TENSOR], at.session_state[state.TIME_LIMIT]
    if solver == "auto":  # a searching solver: asked for, not started by itself
        assert once_threshold_job(graph, solver, tensor, (), limit, start=False) is None
        next(b for b in at.button if b.proto.label.startswith("Find it")).click().run()
        assert not at.exception
    job = once_threshold_job(graph, solver, tensor, (), limit, start=False)
    assert job is not None and job.wait(300) and job.done
    at.run()
    threshold = job.result
    assert threshold.budget is not None and threshold.recomputed_below
    target = budget_scale_of(at).snap(threshold.budget)
    label = f"Set the budget to {budget_scale_of(at).label(target)}"
    at.run()  # another rerun (a widget moved elsewhere): the button is still there
    next(b for b in at.button if b.proto.label == label).click().run()
    assert not at.exception
    assert at.session_state[state.BUDGET] == target != budget
