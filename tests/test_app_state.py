"""The explorer's state at its edges: the upload store, the names links give models, the URL, the checks on
what users type, and the safety net that keeps a failing page from taking the app down."""

import json
import os
import re
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer import state
from explorer.jobs.results import awaited_solve
from explorer.jobs.lanes import stop_background_work
from explorer.pages import PAGES
from explorer.safety import CALLBACK_FAILURE
from explorer.state import models, uploads, url
from explorer.state.budgets import checked_budget, scale_of
from explorer.state.links import page_link
from explorer.state.models import (accept_upload, generated_random_dag, generated_training_chain, model_from_source,
                                   model_from_upload)
from explorer.state.uploads import StoredUpload, UploadStore, default_upload_dir
from explorer.state.zoo import zoo_model, zoo_source
from remat_core import BudgetError, GraphError, ZooError, checkpoint_all_peak, memory_lower_bound
from remat_core.graph import node_label, training_chain

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120
KEY_A, KEY_B, KEY_C, KEY_D = (c * 64 for c in "abcd")


@pytest.fixture(scope="module", autouse=True)
def background_workers():
    yield
    stop_background_work()


def upload(name: str = "g.json", size: int = 10) -> StoredUpload:
    return StoredUpload(name, b"x" * size, True, "op")


def aged(store: UploadStore, key: str, seconds_ago: float) -> None:
    """Mark an entry as last used ``seconds_ago``."""
    when = time.time() - seconds_ago
    os.utime(store.path(key), (when, when))


# -- the upload store ----------------------------------------------------------------------------------------


def test_the_store_keeps_an_upload_under_its_key_and_reads_it_back(tmp_path):
    store = UploadStore(tmp_path / "uploads")
    assert store.get(KEY_A) is None and store.keys() == []
    kept = StoredUpload("résumé graph.json", bytes(range(256)) * 3 + b"\n{}", False, "module")
    assert store.put(KEY_A, kept)
    assert store.get(KEY_A) == kept and store.keys() == [KEY_A]


def test_the_store_lets_the_least_recently_used_go_first_when_it_has_too_many(tmp_path):
    store = UploadStore(tmp_path, max_entries=3)
    for age, key in ((40, KEY_A), (30, KEY_B), (20, KEY_C)):
        store.put(key, upload())
        aged(store, key, age)
    store.get(KEY_A)  # used just now: B is the least recently used
    store.put(KEY_D, upload())
    assert sorted(store.keys()) == sorted([KEY_A, KEY_C, KEY_D])


def test_the_store_stays_within_its_size_and_refuses_what_is_larger_than_all_of_it(tmp_path):
    store = UploadStore(tmp_path, max_bytes=2000)
    store.put(KEY_A, upload(size=700))
    aged(store, KEY_A, 60)
    store.put(KEY_B, upload(size=700))
    aged(store, KEY_B, 30)
    store.put(KEY_C, upload(size=700))  # three of them are more than 2000 bytes: the oldest goes
    assert store.keys() == [KEY_B, KEY_C]
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 2000
    assert not store.put(KEY_D, upload(size=5000)) and store.get(KEY_D) is None
    assert store.keys() == [KEY_B, KEY_C]  # nothing evicted for an upload that is not kept


@pytest.mark.parametrize("damage", [
    lambda raw: raw[: len(raw) // 2],  # cut short
    lambda raw: raw.replace(b"xxxx", b"xyxx", 1),  # a byte changed
    lambda raw: b"not a header\n" + raw,
    lambda raw: b"",
    lambda raw: raw.replace(b'"format": "remat-explorer-upload"', b'"format": "other"'),
])
def test_a_damaged_entry_is_reported_and_removed(tmp_path, damage):
    store = UploadStore(tmp_path)
    store.put(KEY_A, upload(size=100))
    path = store.path(KEY_A)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(GraphError, match="is damaged .*; upload the file again"):
        store.get(KEY_A)
    assert not path.exists() and store.get(KEY_A) is None


def test_the_store_ignores_other_files_and_clears_what_an_interrupted_upload_left(tmp_path):
    store = UploadStore(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    left = tmp_path / ".incoming-abc.upload"
    left.write_bytes(b"half")
    os.utime(left, (time.time() - 7200,) * 2)
    store.put(KEY_A, upload())
    assert store.keys() == [KEY_A] and (tmp_path / "notes.txt").exists() and not left.exists()
    with pytest.raises(GraphError, match="not an upload's content hash"):
        store.get("../../etc/passwd")


def test_the_store_lives_in_the_users_cache_unless_told_otherwise(monkeypatch, tmp_path):
    monkeypatch.delenv(uploads.UPLOAD_DIR_VARIABLE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_upload_dir() == tmp_path / ".cache" / "remat-explorer" / "uploads"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_upload_dir() == tmp_path / "cache" / "remat-explorer" / "uploads"
    monkeypatch.setenv(uploads.UPLOAD_DIR_VARIABLE, str(tmp_path / "elsewhere"))
    assert default_upload_dir() == tmp_path / "elsewhere"


# -- models named by links -----------------------------------------------------------------------------------


def graph_file(graph) -> bytes:
    return json.dumps(graph.to_json()).encode()


def test_an_accepted_upload_is_kept_and_its_content_hash_opens_it_again():
    graph = training_chain(5, mem=3000, name="kept-chain")
    model, not_kept = accept_upload("kept.json", graph_file(graph), add_backward=False)
    assert not_kept is None and model.source == model.key == graph.content_hash
    models.stored_model.clear()
    again = model_from_source(model.key)
    assert again.key == model.key and again.origin == "uploaded: kept.json"


def test_a_hash_the_store_does_not_hold_says_to_upload_again():
    with pytest.raises(GraphError, match="no upload with content hash 000000000000… is kept on this server"):
        model_from_source("0" * 64)


def test_a_stored_upload_that_reads_as_another_graph_is_refused():
    graph = training_chain(3, mem=10, name="one")
    uploads.upload_store().put("e" * 64, StoredUpload("one.json", graph_file(graph), False, "op"))
    with pytest.raises(GraphError, match="reads as another graph now"):
        model_from_source("e" * 64)


def test_an_upload_that_cannot_be_kept_still_opens_and_says_so(monkeypatch):
    def full(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(UploadStore, "put", full)
    model, not_kept = accept_upload("c.json", graph_file(training_chain(4, mem=7)), add_backward=False)
    assert len(model.graph) == 10 and "No space left on device" in not_kept and "reload" in not_kept


def test_generated_graphs_are_named_by_their_recipe_and_rebuilt_from_it():
    chain = generated_training_chain(12, models.activation_bytes(0.01))
    dag = generated_random_dag(40, 0.15, 7)
    assert chain.source == "training-chain:layers=12,activation=0.01MiB"
    assert dag.source == "random-dag:nodes=40,edge_probability=0.15,seed=7"
    for model in (chain, dag):
        assert model_from_source(model.source).key == model.key


def test_zoo_models_are_named_by_what_differs_from_the_zoos_defaults():
    assert zoo_source("resnet18", {"batch_size": 32, "image_size": 224}, "flops") == "resnet18"
    assert zoo_source("resnet18", {"batch_size": 4, "image_size": 224}, "unit") == "resnet18:batch_size=4,cost=unit"
    mlp = zoo_model("mlp", "op", "unit", {"batch_size": 8})
    assert mlp.source == "mlp:batch_size=8,cost=unit" and mlp.level == "op"
    assert model_from_source(mlp.source, "op") is mlp  # the same cached trace


@pytest.mark.parametrize("source, level, error, message", [
    ("nosuch", None, GraphError, "unknown model 'nosuch': a link names a zoo model"),
    ("training-chain:layers=abc,activation=4MiB", None, GraphError, "layers='abc' is not a whole number"),
    ("training-chain:layers=99999,activation=4MiB", None, GraphError, "layers 99999 is out of range: it goes from 1"),
    ("training-chain:layers=3", None, GraphError, "activation must be a size such as 4MiB"),
    ("training-chain:layers=3,activation=1e999", None, GraphError, "activation must be a size"),
    ("random-dag:nodes=10,edge_probability=nan,seed=0", None, GraphError, "edge_probability='nan' is not a number"),
    ("random-dag:nodes=10,seed=0", None, GraphError, "edge_probability= is missing"),
    ("random-dag:nodes=10,edge_probability=2,seed=0", None, GraphError, "edge probability 2 is out of range"),
    ("mlp:batch_size=0", "op", ZooError, "batch_size"),
    ("mlp:batch_size=-4", "op", GraphError, "batch_size='-4' is not a whole number"),
    ("mlp:depth", "op", GraphError, "'depth' is not a setting; write name=value"),
    ("mlp:cost=zzz", "op", GraphError, "unknown cost model 'zzz'"),
    ("mlp", "deep", GraphError, "unknown level 'deep'"),
])
def test_a_name_no_model_has_is_refused_with_what_a_link_may_name(source, level, error, message):
    with pytest.raises(error, match=message):
        model_from_source(source, level)


def pathological(nodes: list[dict], edges=()) -> bytes:
    return json.dumps({"format": "remat-graph", "version": 1, "name": "odd", "nodes": nodes,
                       "edges": list(edges)}).encode()


PATHOLOGICAL_REFUSED = {
    "huge-node.json": (pathological([{"id": "conv", "mem": 10**40, "cost": 1}]), "node 'conv': mem 1000"),
    "huge-cost.json": (pathological([{"id": "mm", "mem": 4, "cost": 1e300}]), "node 'mm': cost 1e+300 is more"),
    "negative.json": (pathological([{"id": "relu", "mem": -8, "cost": 1}]), "node 'relu': mem must be a non-negative"),
    "nan.json": (pathological([{"id": "add", "mem": 8, "cost": float("nan")}]),
                 "node 'add': cost must be a non-negative finite number, got nan"),
}
PATHOLOGICAL_ACCEPTED = {
    "one-node.json": pathological([{"id": "only", "mem": 100, "cost": 1}]),
    "two-nodes.json": pathological([{"id": "a", "mem": 100, "cost": 1, "kind": "forward"},
                                    {"id": "b", "mem": 50, "cost": 2, "kind": "backward"}], [["a", "b"]]),
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL_REFUSED))
def test_an_upload_with_absurd_values_is_refused_naming_the_node_and_field(name):
    data, message = PATHOLOGICAL_REFUSED[name]
    with pytest.raises(GraphError) as info:
        model_from_upload(name, data)
    assert message in str(info.value)


def test_a_graph_without_parameters_is_explored_as_it_is():
    model = model_from_upload("one-node.json", PATHOLOGICAL_ACCEPTED["one-node.json"], add_backward=True)
    assert len(model.graph) == 1 and "no parameters, so no backward pass to add" in model.origin


# -- budgets and links ---------------------------------------------------------------------------------------


def test_budget_text_is_checked_against_the_sliders_range():
    graph = training_chain(10, mem=2**20)
    scale = scale_of(graph)
    assert checked_budget("100%", graph) == checkpoint_all_peak(graph)
    assert checked_budget(scale.text(scale.largest), graph) == scale.largest
    for text in ("0", "1e999", "-1", "abc", "nan", "", "99999999999999999999999TiB", "200%"):
        with pytest.raises(BudgetError):
            checked_budget(text, graph)
    with pytest.raises(BudgetError, match="outside the range .* no schedule fits under the lower bound"):
        checked_budget("1B", graph)


def test_a_slider_position_reads_back_as_the_same_bytes_from_its_text():
    graph = training_chain(30, mem=3 * 10**6)
    scale = scale_of(graph)
    position = scale.low
    while position <= scale.high:
        nbytes = scale.to_bytes(position)
        assert checked_budget(scale.text(nbytes), graph) == nbytes if scale.smallest <= nbytes else True
        assert len(scale.text(nbytes)) <= len(f"{position:.{scale.decimals}f}{scale.unit.name}")
        position += scale.step


def test_a_link_to_the_model_page_goes_to_the_root():
    assert page_link("model", model="resnet18") == "/model?model=resnet18"
    assert page_link("schedule", budget="50%") == "/schedule?budget=50%25"


# -- the URL, through the app --------------------------------------------------------------------------------


def opened(params: dict[str, str], page: str | None = None) -> AppTest:
    """The app opened on a link with these parameters (as a new tab would)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    if page is not None:
        at.switch_page(page)
    return at.run()


def warnings(at: AppTest) -> str:
    return " ".join(w.value.replace("\\", "") for w in at.warning)


def test_the_documented_link_opens_resnet18_with_rotor_at_70_percent_of_its_peak():
    at = opened({"model": "resnet18", "solver": "rotor", "budget": "70%"}, "app_pages/schedule.py")
    assert not at.exception and not at.error and not at.warning
    model = at.session_state[state.MODEL]
    assert model.source == "resnet18" and model.level == "module" and "batch_size=32" in model.graph.name
    assert at.session_state[state.SOLVER] == "rotor"
    assert at.session_state[state.BUDGET] == scale_of(model.graph).snap(round(checkpoint_all_peak(model.graph) * 0.7))
    assert at.title[0].value == "Schedule"
    assert at.query_params["model"] == "resnet18" and at.query_params["solver"] == "rotor"


def test_a_link_opens_resnet50_at_op_level():
    at = opened({"model": "resnet50", "level": "op"}, "app_pages/model.py")
    assert not at.exception and not at.warning
    model = at.session_state[state.MODEL]
    assert model.level == "op" and model.source == "resnet50" and len(model.graph) > 900
    assert at.query_params["level"] == "op"


def test_the_session_is_written_into_the_url_and_a_new_tab_on_it_opens_the_same():
    at = opened({}, "app_pages/schedule.py")
    slider = at.slider(key="w_budget")
    slider.set_value(slider.min + 5 * (slider.max - slider.min) / 7).run()
    at.selectbox(key="w_solver").set_value("chen-greedy").run()
    assert not at.exception
    written = dict(at.query_params)
    budget = at.session_state[state.BUDGET]
    assert written["budget"] == scale_of(at.session_state[state.MODEL].graph).text(budget)
    assert written["solver"] == "chen-greedy" and written["model"] == "resnet18:batch_size=4"
    again = opened(written, "app_pages/schedule.py")
    assert not again.warning and again.session_state[state.BUDGET] == budget
    assert again.session_state[state.SOLVER] == "chen-greedy"
    assert again.slider(key="w_budget").value == at.slider(key="w_budget").value
    assert again.session_state[state.MODEL].key == at.session_state[state.MODEL].key


def test_a_link_names_the_why_pages_tensor_by_label_or_id():
    model = generated_training_chain(6, 2**20)
    label = node_label(model.graph, "f3")
    assert label != "f3"
    at = opened({"model": model.source, "tensor": label})
    assert not at.exception and not at.warning
    assert at.session_state[state.MODEL].key == model.key
    assert at.session_state[state.WHY_TENSOR] == "f3" and at.query_params["tensor"] == label
    by_id = opened({"model": model.source, "tensor": "b2"})
    assert by_id.session_state[state.WHY_TENSOR] == "b2" and by_id.query_params["tensor"] == node_label(model.graph,
                                                                                                          "b2")


def test_bad_link_values_are_each_reported_and_the_page_opens_on_what_it_had():
    at = opened({"model": "resnet18:batch_size=99999", "solver": "nosuch", "budget": "1e999", "tensor": "nowhere",
                 "level": "deep"})
    assert not at.exception and not at.error
    text = warnings(at)
    for expected in ("level='deep' is no level", "solver='nosuch' is not a solver here", "budget='1e999'",
                     "tensor='nowhere'", "This link could not be followed in full"):
        assert expected in text, text
    assert at.query_params["model"] == "resnet18:batch_size=4"  # the URL shows what the page shows
    assert at.session_state[state.BUDGET] == state.default_budget(at.session_state[state.MODEL].graph)
    at.run()  # a rerun the page makes by itself (a solve landed) keeps the message
    assert "This link could not be followed in full" in warnings(at)
    at.session_state[state.BUDGET] += 2**20  # the user moves on: the message goes
    at.run()
    assert not at.warning
    broken = opened({"model": "resnet18:batch_size=99999"})
    assert "could not be opened" in warnings(broken) and "batch_size" in warnings(broken)
    assert broken.session_state[state.MODEL].source == "resnet18:batch_size=4"


def test_what_the_session_wrote_is_not_applied_again_but_a_new_link_is():
    at = opened({})
    budget = at.session_state[state.BUDGET]
    graph = at.session_state[state.MODEL].graph
    at.session_state[state.BUDGET] = budget + 2**20  # changed by a control: the URL still shows the old one
    at.run()
    assert at.session_state[state.BUDGET] == budget + 2**20
    assert at.query_params["budget"] == scale_of(graph).text(budget + 2**20)
    at.query_params["budget"] = "100%"  # a link clicked inside the app
    at.run()
    assert at.session_state[state.BUDGET] == scale_of(graph).snap(checkpoint_all_peak(graph))


def test_a_level_alone_retraces_the_current_zoo_model_at_that_level():
    at = opened({"model": "mlp:batch_size=8"})
    assert at.session_state[state.MODEL].level == "module"
    at.query_params["level"] = "op"
    at.run()
    assert not at.warning and at.session_state[state.MODEL].level == "op"
    assert at.session_state[state.MODEL].source == "mlp:batch_size=8"


# -- what users type -----------------------------------------------------------------------------------------


BAD_TEXT = ("1e999", "-1", "abc", "nan", "0", "99999999999999999999999TiB", "1B")


def test_a_bad_typed_budget_says_why_beside_the_box_and_keeps_the_budget():
    at = opened({}, "app_pages/schedule.py")
    before = at.session_state[state.BUDGET]
    for text in BAD_TEXT:
        at.text_input(key="w_budget_text").input(text).run()
        assert not at.exception and at.session_state[state.BUDGET] == before, text
        assert any(text in w.value.replace("\\", "") for w in at.warning), text
        assert at.query_params["budget"] == scale_of(at.session_state[state.MODEL].graph).text(before)
    at.text_input(key="w_budget_text").input("").run()
    assert not at.warning and at.session_state[state.BUDGET] == before


def test_every_number_input_on_every_page_declares_its_range():
    """Streamlit refuses a number out of a declared range (or not a number) beside the input, keeping the last
    good value; an input without a range would take 1e999."""
    at = opened({"solver": "dtr"})
    checked = []
    for entry in PAGES:
        at.switch_page(entry.path).run()
        for box in at.number_input:
            assert box.proto.has_min and box.proto.has_max, (entry.title, box.label)
            checked.append(box.label)
    assert {"Layers", "MiB per activation", "max_recompute_factor", "Time limit per solve (s)"} <= set(checked)


# -- the safety net ------------------------------------------------------------------------------------------


def assert_contained(at: AppTest, where: str) -> None:
    assert not at.exception, at.exception
    assert any(f"Something went wrong in {where}" in e.value.replace("\\", "") for e in at.error), \
        [e.value for e in at.error]
    details = [e for e in at.expander if e.label == "Details"]
    assert details and "Traceback" in details[0].code[0].value


def test_a_failing_page_shows_a_short_error_and_the_sidebar_and_other_pages_keep_working(monkeypatch):
    def broken(*args, **kwargs):
        raise OverflowError("int too large to convert to float")
    monkeypatch.setattr("remat_core.viz.module_memory_figure", broken)
    at = opened({}, "app_pages/model.py")
    assert_contained(at, "the Model page")
    assert "OverflowError" in at.error[0].value
    assert any("Current model" in m.value for m in at.sidebar.markdown)
    at.switch_page("app_pages/schedule.py").run()
    assert not at.exception and not at.error and at.title[0].value == "Schedule"


def test_a_failing_fragment_is_contained_in_it(monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("metrics broke")
    monkeypatch.setattr("explorer.widgets.metrics.schedule_metrics", broken)
    monkeypatch.setattr("explorer.widgets.metrics.estimate_metrics", broken)
    at = opened({"budget": "100%"}, "app_pages/schedule.py")
    awaited_solve(at.session_state[state.MODEL].graph, at.session_state[state.BUDGET], at.session_state[state.SOLVER],
                  (), at.session_state[state.TIME_LIMIT])  # waited for: its metrics now draw (and fail)
    at.run()
    assert_contained(at, "this part of the page (settled_metrics)")
    assert at.title[0].value == "Schedule"


def test_a_failing_control_is_reported_in_the_next_run_and_nothing_else_breaks(monkeypatch):
    at = opened({}, "app_pages/schedule.py")
    before = at.session_state[state.BUDGET]

    def broken(value):
        raise RuntimeError("budget store broke")
    monkeypatch.setattr(state, "set_budget", broken)
    slider = at.slider(key="w_budget")
    slider.set_value(slider.max).run()
    assert_contained(at, "a control's reaction (budget_changed)")
    assert at.session_state[state.BUDGET] == before and CALLBACK_FAILURE not in at.session_state
    at.run()
    assert not at.error


def test_every_fragment_goes_through_the_safety_net():
    bare = [f"{path.relative_to(ROOT)}:{number}" for folder in ("explorer", "pages") for path in (ROOT / folder).rglob(
        "*.py") if path.name != "safety.py" for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bst\.fragment\b", line)]
    assert not bare, f"use explorer.safety.fragment (the safety net inside st.fragment) at {bare}"


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL_ACCEPTED))
def test_the_smallest_graphs_work_on_every_page(name):
    at = opened({}, "app_pages/model.py")
    at.toggle(key="w_upload_backward").set_value(False).run()
    at.file_uploader(key="w_upload").set_value((name, PATHOLOGICAL_ACCEPTED[name], "application/json")).run()
    graph = at.session_state[state.MODEL].graph
    assert graph.name == "odd" and memory_lower_bound(graph) <= checkpoint_all_peak(graph)
    for entry in PAGES:
        at.switch_page(entry.path).run()
        assert not at.exception and not at.error, (entry.title, [e.value for e in at.error])


def test_the_learn_page_works_with_a_one_step_walkthrough():
    """At the top of its budget slider the lesson's schedule is one recursion call: one step, no step slider."""
    at = opened({}, "app_pages/learn.py")
    at.number_input(key="w_learn_size_chain").set_value(3).run()
    at.segmented_control(key="w_learn_mode").set_value("budget").run()
    at.slider(key="w_learn_budget").set_value(at.slider(key="w_learn_budget").max).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Step 1 of 1" in m.value for m in at.markdown)


def test_the_model_pages_form_opens_on_the_loaded_zoo_model_and_its_options():
    at = opened({"model": "gat:batch_size=300,width=16,cost=unit", "level": "op"}, "app_pages/model.py")
    assert not at.exception
    assert at.selectbox(key="w_zoo_model").value == "gat"
    assert at.selectbox(key="w_zoo_level").value == "op" and at.selectbox(key="w_zoo_cost").value == "unit"
    assert at.number_input(key="w_zoo_gat_batch_size").value == 300
    assert at.number_input(key="w_zoo_gat_width").value == 16


def test_a_zoo_link_and_the_model_pages_form_open_the_same_model():
    """One default per zoo model: ``model=resnet50`` opened batch 32 while the Model page's form traced batch 4, so
    a lesson's links showed other numbers than the class saw on the page."""
    linked = opened({"model": "mlp"}, "app_pages/model.py").session_state[state.MODEL]
    at = opened({}, "app_pages/model.py")
    at.selectbox(key="w_zoo_model").set_value("mlp").run()
    next(b for b in at.button if b.proto.label == "Trace this model").click().run()
    assert not at.exception
    formed = at.session_state[state.MODEL]
    assert formed.key == linked.key and formed.source == linked.source == "mlp"
    assert at.query_params["model"] == "mlp"


@pytest.mark.parametrize("link", [{}, {"budget": "70%"}, {"budget": "123456789"}])
def test_the_thumb_the_url_and_the_sidebar_show_one_budget(link):
    """After a link or a drag, the budget is the slider's position: its thumb's text, the URL's and the sidebar's
    are the same digits (a drag once wrote ``budget=0.542871094GiB`` while the thumb and sidebar showed others)."""
    at = opened({"model": "resnet18", **link}, "app_pages/schedule.py")
    slider = at.slider(key="w_budget")
    if not link:
        slider.set_value(slider.min + 37 * slider.proto.step).run()
        slider = at.slider(key="w_budget")
    scale = scale_of(at.session_state[state.MODEL].graph)
    thumb = slider.proto.format % slider.value  # what the thumb shows: "0.545 GiB"
    assert at.session_state[state.BUDGET] == scale.to_bytes(slider.value)
    assert at.query_params["budget"] == thumb.replace(" ", "")
    assert any(f"Budget **{thumb}**" in m.value for m in at.sidebar.markdown)


def test_back_to_a_url_the_session_wrote_before_goes_back_to_that_state(monkeypatch):
    """The browser's Back brings back a URL this session wrote: it was written over with the current state (a new
    history entry), so Back could never leave the page. (A request that soon after a write is taken for one the
    browser sent before it had the new URL: the test makes "soon" nothing.)"""
    monkeypatch.setattr(url, "LAG_SECONDS", 0.0)
    at = opened({"model": "resnet18", "solver": "rotor"}, "app_pages/schedule.py")
    before = dict(at.query_params)
    slider = at.slider(key="w_budget")
    slider.set_value(slider.min + 3 * slider.proto.step).run()  # a control: the URL follows it
    moved = dict(at.query_params)
    assert moved["budget"] != before["budget"]
    at.query_params.update(before)  # Back
    at.run()
    assert not at.warning and dict(at.query_params) == before
    assert at.session_state[state.BUDGET] == scale_of(at.session_state[state.MODEL].graph).snap(
        checked_budget(before["budget"], at.session_state[state.MODEL].graph))



def test_a_request_right_after_a_write_carrying_the_url_before_it_is_not_taken_for_back():
    """An upload's second rerun carried the URL from before the upload: it must not reopen the old model."""
    at = opened({"model": "resnet18", "solver": "rotor"}, "app_pages/schedule.py")
    before = dict(at.query_params)
    slider = at.slider(key="w_budget")
    slider.set_value(slider.min + 3 * slider.proto.step).run()
    budget = at.session_state[state.BUDGET]
    at.query_params.update(before)  # the lagging request, right after the write
    at.run()
    assert at.session_state[state.BUDGET] == budget and at.query_params["budget"] != before["budget"]


def test_the_model_pages_form_starts_at_the_loaded_models_options():
    at = opened({}, "app_pages/model.py")  # a new session: resnet18 at batch 4
    assert at.session_state[state.MODEL].source == "resnet18:batch_size=4"
    assert at.number_input(key="w_zoo_resnet18_batch_size").value == 4
    at.selectbox(key="w_zoo_model").set_value("resnet50").run()
    assert at.number_input(key="w_zoo_resnet50_batch_size").value == 32  # not loaded: the zoo's, as a link's


def test_the_budget_marks_never_share_a_line():
    """On a narrow track (the Schedule page's budget row shares its width with the host link) the lower bound's
    and the peak's labels ran into each other: the peak's is a line below."""
    from explorer.widgets.budget import budget_scale, marks_html

    html = marks_html(budget_scale(455 * 2 ** 20, 755 * 2 ** 20))
    lower, peak = html.split("▲")[1:]
    assert "lower bound" in lower and "peak" in peak
    assert html.count("top:0.0rem") == 1 and html.count("top:1.1rem") == 1 and "height:2.4rem" in html
