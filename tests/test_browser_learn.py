"""The Learn page's step controls and the Why page's link, in chromium: Next, Previous, the slider's End and
Home keys, Play and a click on the separator tree all move one step value, and the "step k of n" text
always equals the slider; a one-step walk-through works; the Why link names the tensor shown. Serving and
waiting as in :mod:`test_browser`."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from test_browser import RENDER_TIMEOUT_MS, assert_no_error, wait_rendered
from test_browser import page  # noqa: F401  (fixtures)

from explorer.state import learn as learn_state
from remat_core.graph import node_labels
from remat_core.solvers import trace_recursion
from remat_core.viz import SeparatorTreeChart
from remat_core.viz.lesson import MARGIN

pytestmark = pytest.mark.browser

LIVE_SLIDERS = """[...document.querySelectorAll('[data-testid="stSlider"] input[type="range"]')]
    .filter(s => !s.closest('[data-stale="true"]') && s.closest('[data-testid="stSlider"]').checkVisibility())"""
"""The sliders on the page, not those of an earlier step still on their way out."""
READ_STEP = """() => {
  const text = [...document.querySelectorAll('p')].map(p => p.innerText).find(t => /^Step \\d+ of \\d+/.test(t));
  const sliders = """ + LIVE_SLIDERS + """;
  if (!text) return {k: null, n: null, slider: null, sliders: sliders.length};  // the page is being redrawn
  const [k, n] = text.match(/^Step (\\d+) of (\\d+)/).slice(1).map(Number);
  return {k, n, slider: sliders.length ? Number(sliders[sliders.length - 1].value) : null,
          sliders: sliders.length};
}"""


def step_of(tab) -> dict:
    return tab.evaluate(READ_STEP)


def press_on_slider(tab, key: str, which: int = -1) -> None:
    """Focus a slider on the page (the last: the step slider) and press ``key`` on it."""
    tab.evaluate(f"() => {{ const s = {LIVE_SLIDERS}; s.at({which}).focus(); }}")
    tab.keyboard.press(key)


def wait_for_step(tab, k: int) -> dict:
    """Until the page says step ``k`` and the slider says the same (the page may take a moment to draw both)."""
    agree = f"() => {{ const s = ({READ_STEP})(); return s.k === {k} && (s.slider === {k} || s.n === 1); }}"
    try:
        tab.wait_for_function(agree, timeout=RENDER_TIMEOUT_MS)
    except Exception as e:  # playwright's TimeoutError: say what the page showed instead
        raise AssertionError(f"the page did not come to step {k} with its slider: it shows {step_of(tab)}") from e
    wait_rendered(tab)
    return step_of(tab)


@pytest.fixture
def learn(app_url, page):  # noqa: F811
    page.goto(f"{app_url}/learn")
    wait_rendered(page)
    page.wait_for_selector(".js-plotly-plot", timeout=RENDER_TIMEOUT_MS)
    return page


def test_next_previous_end_home_and_play_move_one_step(learn):
    tab = learn
    n = wait_for_step(tab, 1)["n"]
    for k in (2, 3, 4):
        tab.get_by_role("button", name="Next").click()
        wait_for_step(tab, k)
    tab.get_by_role("button", name="Previous").click()
    wait_for_step(tab, 3)
    press_on_slider(tab, "End")
    wait_for_step(tab, n)
    press_on_slider(tab, "Home")
    wait_for_step(tab, 1)
    tab.get_by_role("button", name="Play").click()
    wait_for_step(tab, 3)  # the timer moved it on, one step at a time
    tab.get_by_role("button", name="Pause").click()
    tab.wait_for_function("() => [...document.querySelectorAll('p')].some(p => /^Step \\d+ of \\d+$/.test(p.innerText))",
                          timeout=RENDER_TIMEOUT_MS)  # "· playing" is gone: the pause has landed
    wait_rendered(tab)
    paused = step_of(tab)
    tab.wait_for_timeout(2500)
    assert step_of(tab)["k"] == paused["k"] == paused["slider"], "Pause did not stop the steps"
    assert_no_error(tab, "Learn after Play and Pause")


def test_a_click_on_a_bag_opens_the_first_call_in_it(learn):
    tab = learn
    wait_for_step(tab, 1)
    chart = tab.locator('[class*="st-key-learn_separators_"] canvas').first
    chart.scroll_into_view_if_needed()
    chart.wait_for(timeout=RENDER_TIMEOUT_MS)
    bag, x, y = child_of_the_root(chart.bounding_box())
    tab.mouse.click(x, y)
    tab.wait_for_function("bag => [...document.querySelectorAll('strong')].some(s => new RegExp(`opens in bag ${bag}\\\\b`)"
                          ".test(s.innerText))", arg=bag, timeout=RENDER_TIMEOUT_MS)
    wait_rendered(tab)
    now = step_of(tab)
    assert now["k"] > 1 and now["k"] == now["slider"]


def child_of_the_root(box: dict) -> tuple[int, float, float]:
    """A bag one level below the root of the default lesson's separator tree (the top call opens calls in
    both children), and where it is drawn in a chart at ``box``: the chart's grid is the box less
    :data:`remat_core.viz.lesson.MARGIN` on each side, its hidden axes span the option's ``min``..``max``."""
    chain = learn_state.EXAMPLES["chain"]
    graph = chain.build(chain.default)
    trace = trace_recursion(graph, "treewidth")
    option = SeparatorTreeChart(trace.decomposition.bags, trace.separators.parent, trace.separators.root,
                                node_labels(graph)).at()
    points = option["series"][SeparatorTreeChart.nodes_series_index]["data"]
    root = points[trace.separators.root]["value"]
    bag = next(b for b, p in enumerate(points) if abs(p["value"][1] - (root[1] - 1)) < 1e-9)
    (x0, x1), (y0, y1) = ((option[a]["min"], option[a]["max"]) for a in ("xAxis", "yAxis"))
    x, y = points[bag]["value"]
    width, height = box["width"] - 2 * MARGIN, box["height"] - 2 * MARGIN
    return bag, box["x"] + MARGIN + (x - x0) / (x1 - x0) * width, box["y"] + MARGIN + (y1 - y) / (y1 - y0) * height


def test_a_one_step_walkthrough_says_step_1_of_1_without_a_slider(learn):
    tab = learn
    size = tab.get_by_label("Size (layers)")
    size.fill("3")
    size.press("Enter")
    wait_rendered(tab)
    tab.wait_for_function(f"() => ({READ_STEP})().n === 11", timeout=RENDER_TIMEOUT_MS)  # 3 layers, 11 steps
    tab.get_by_role("radio", name="Fit a budget").click()
    tab.wait_for_function(f"() => ({READ_STEP})().sliders === 2", timeout=RENDER_TIMEOUT_MS)  # the budget's came
    wait_rendered(tab)
    press_on_slider(tab, "End", which=0)  # the budget's slider, above the step slider
    tab.wait_for_function(f"() => ({READ_STEP})().n === 1", timeout=RENDER_TIMEOUT_MS)
    wait_rendered(tab)
    now = step_of(tab)
    assert (now["k"], now["n"], now["sliders"]) == (1, 1, 1)  # the budget's slider only: no step slider
    assert tab.get_by_role("button", name="Next").is_disabled()
    assert_no_error(tab, "Learn with a one-step walk-through")


WHY_LINK = '[data-testid="stCaptionContainer"] a[href*="tensor="]'


def why_link(tab) -> dict:
    """The Why page's link to the explanation shown, read back: its address, path and query parameters."""
    href = tab.locator(WHY_LINK).first.get_attribute("href")
    parts = urlsplit(href)
    return {"href": href, "path": parts.path, **{k: v[0] for k, v in parse_qs(parts.query).items()}}


def test_the_why_link_names_the_tensor_picked(app_url, page):  # noqa: F811
    page.goto(f"{app_url}/why")
    wait_rendered(page)
    picker = page.locator('[data-testid="stSelectbox"]').first
    picker.click()
    options = page.locator('[role="option"]')
    options.nth(1).wait_for(timeout=RENDER_TIMEOUT_MS)
    chosen = options.nth(1).inner_text().rsplit(" · computed", 1)[0]
    options.nth(1).click()
    page.get_by_text(f"1st computation of {chosen}").first.wait_for(timeout=RENDER_TIMEOUT_MS)
    wait_rendered(page)
    link = why_link(page)
    assert link["path"].endswith("/why") and link["tensor"] == chosen
    assert {"model", "solver", "budget"} <= set(link) and link["href"].startswith("/why?")
    assert_no_error(page, "Why after picking a tensor")


@pytest.mark.slow  # 25 s in a browser
def test_the_why_link_opens_the_page_on_its_tensor(app_url, page):  # noqa: F811
    page.goto(f"{app_url}/why")
    wait_rendered(page)
    first = why_link(page)
    picker = page.locator('[data-testid="stSelectbox"]').first
    picker.click()
    page.locator('[role="option"]').nth(2).click()
    wait_rendered(page)
    link = why_link(page)
    assert link["tensor"] != first["tensor"]
    page.goto(app_url + link["href"])  # a new session: only the URL says which tensor
    wait_rendered(page)
    assert why_link(page)["tensor"] == link["tensor"]
