"""State in the URL, in a real browser: a link opens what it says, a moved slider and an uploaded graph
survive a reload, a second tab on the same link sees the same, and a bad link says what it could not do."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from test_browser import RENDER_TIMEOUT_MS, chromium_tab, require_chromium, serving, wait_rendered
from test_browser_fuzz import upload_file

from explorer.pages import PAGES
from explorer.state.budgets import scale_of
from remat_core import checkpoint_all_peak
from remat_core.frontends import trace_zoo_model
from remat_core.graph import training_chain

pytestmark = pytest.mark.browser

SLIDER = '[data-testid="stSlider"] input[type="range"]'


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    require_chromium()
    with serving("streamlit-state.log", env={"REMAT_UPLOAD_DIR": str(tmp_path_factory.mktemp("state-uploads"))}) \
            as url:
        yield url


@pytest.fixture(scope="module")
def tab(app_url):
    with chromium_tab(1024, 768) as opened:
        yield opened


def params(tab) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(tab.url).query).items()}


def sidebar(tab) -> str:
    return tab.locator('[data-testid="stSidebar"]').inner_text()


def shown_budget(tab) -> str:
    return re.search(r"Budget (.+?) \(", sidebar(tab)).group(1)


def wait_for_url(tab, name: str, differing_from: str | None) -> str:
    """The URL's parameter ``name`` once it differs from ``differing_from``."""
    handle = tab.wait_for_function(
        "([name, before]) => { const v = new URLSearchParams(location.search).get(name); "
        "return v !== null && v !== before ? v : null; }", arg=[name, differing_from], timeout=RENDER_TIMEOUT_MS)
    return handle.json_value()


def open_link(tab, app_url: str, link: str) -> None:
    tab.goto(app_url + link)
    wait_rendered(tab)


def test_the_documented_link_opens_resnet18_with_rotor_at_70_percent_of_its_peak(tab, app_url):
    open_link(tab, app_url, "/schedule?model=resnet18&solver=rotor&budget=70%25")
    assert tab.locator('[data-testid="stMainBlockContainer"] h1').first.inner_text() == "Schedule"
    assert not tab.locator('[data-testid="stAlertContentWarning"]', has_text="link").count()
    graph = trace_zoo_model("resnet18", 32, level="module")
    scale = scale_of(graph)
    text = sidebar(tab)
    assert "resnet18 (batch_size=32" in text and "Solver rotor" in text
    assert f"Budget {scale.label(scale.snap(round(checkpoint_all_peak(graph) * 0.7)))} (70% of peak)" in text
    assert params(tab)["model"] == "resnet18" and params(tab)["solver"] == "rotor"


def test_a_moved_slider_is_in_the_url_and_survives_a_reload(tab, app_url):
    open_link(tab, app_url, "/schedule?model=resnet18&solver=rotor&budget=70%25")
    before = params(tab)["budget"]
    slider = tab.locator(SLIDER).first
    slider.focus()
    for _ in range(12):  # dragged fast: a burst of moves, each a rerun of the slider's fragment
        tab.keyboard.press("ArrowRight")
    wait_for_url(tab, "budget", before)
    wait_rendered(tab)
    # the burst has landed once the URL and the sidebar show one budget (the same digits: one value)
    tab.wait_for_function(
        "() => { const b = new URLSearchParams(location.search).get('budget'); "
        "const m = document.querySelector('[data-testid=\"stSidebar\"]').innerText.match(/Budget (.+?) \\(/); "
        "return b !== null && m !== null && m[1].replace(' ', '') === b; }", timeout=RENDER_TIMEOUT_MS)
    budget, position = params(tab)["budget"], slider.input_value()
    shown = shown_budget(tab)
    tab.reload()
    wait_rendered(tab)
    assert params(tab)["budget"] == budget and shown_budget(tab) == shown
    assert tab.locator(SLIDER).first.input_value() == position
    assert "Solver rotor" in sidebar(tab)


def test_an_uploaded_graph_survives_a_reload_and_opens_in_a_second_tab(tab, app_url):
    graph = training_chain(9, mem=3 * 2**20, name="kept-for-reload")
    open_link(tab, app_url, "/")
    upload_file(tab, "kept.json", json.dumps(graph.to_json()))
    key = wait_for_url(tab, "model", "resnet18:batch_size=4")
    assert re.fullmatch(r"[0-9a-f]{64}", key) and "kept-for-reload" in sidebar(tab)
    tab.reload()
    wait_rendered(tab)
    assert "kept-for-reload" in sidebar(tab) and params(tab)["model"] == key
    second = tab.context.new_page()  # another tab: a session of its own
    try:
        second.goto(tab.url)
        wait_rendered(second)
        assert "kept-for-reload" in sidebar(second)
    finally:
        second.close()


@pytest.mark.slow  # tracing resnet50 at op level; test_app_state covers the same link without a browser
def test_a_link_opens_resnet50_at_op_level(tab, app_url):
    open_link(tab, app_url, "/graph?model=resnet50&level=op")
    text = sidebar(tab)
    nodes = int(re.search(r"Nodes ([\d,]+)", text).group(1).replace(",", ""))
    assert "resnet50" in text and "op level" in text and nodes > 900
    assert params(tab)["level"] == "op" and params(tab)["model"] == "resnet50"


def test_a_bad_link_says_what_it_could_not_do_and_the_page_works(tab, app_url):
    open_link(tab, app_url, "/schedule?model=nosuch&solver=zzz&budget=abc&tensor=nowhere")
    warning = tab.locator('[data-testid="stAlertContentWarning"]', has_text="could not be followed").first
    text = warning.inner_text()
    for part in ("model='nosuch'", "solver='zzz'", "budget='abc'", "tensor='nowhere'"):
        assert part in text, text
    assert not tab.locator('[data-testid="stException"]').count()
    assert params(tab)["model"] == "resnet18:batch_size=4" and "budget" in params(tab)


def test_every_page_answers_at_its_name_and_the_root_leads_to_the_model_page(tab, app_url):
    """``/model`` said "Page not found" (Streamlit serves its default page at ``/`` only)."""
    for entry in PAGES:
        open_link(tab, app_url, f"/{entry.url_path}?model=mlp&solver=rotor")  # a small model: quick pages
        assert urlsplit(tab.url).path == f"/{entry.url_path}"
        assert tab.locator('[data-testid="stMainBlockContainer"] h1').first.inner_text() == entry.title
        assert not tab.get_by_text("Page not found").count()
    open_link(tab, app_url, "/?model=mlp&solver=rotor")
    assert urlsplit(tab.url).path == "/model" and params(tab)["model"] == "mlp" and params(tab)["solver"] == "rotor"


def test_back_walks_out_of_the_pages_instead_of_staying(tab, app_url):
    """Each Back landed on a URL the page wrote over at once (a new entry): the user could not leave."""
    open_link(tab, app_url, "/model?model=mlp&solver=rotor")
    for name in ("Schedule", "Timeline"):
        tab.locator('[data-testid="stSidebarNav"] a', has_text=name).click()
        tab.wait_for_function(f"() => location.pathname === '/{name.lower()}' && location.search.includes('budget=')",
                              timeout=RENDER_TIMEOUT_MS)
        wait_rendered(tab)
    paths = []
    for _ in range(6):
        tab.go_back()
        wait_rendered(tab)
        tab.wait_for_timeout(1500)  # a page that wrote its URL again would have pushed a new entry by now
        paths.append(tab.evaluate("() => location.pathname"))
        if paths[-1] == "/model":
            break
    assert "/schedule" in paths and paths[-1] == "/model", paths
