"""Odd input in a real browser: every slider to both ends, every text and number input given values no user
should type, pathological uploads; after them, every page visited. No page may show an exception, a
traceback or the safety net's error, and the server may log nothing (it runs at warning level: a
warning, an error or a traceback fails the test).

The default run uploads the pathological files and the smallest graphs. ``@pytest.mark.slow`` adds the fuzz of
the inputs: a sampled one (about a minute on two busy cores) gives every text input every bad value and each
number input a rotating share of them (Streamlit's number input refuses them all alike, in the browser),
moves every slider to both ends, and revisits every page after the Schedule page's inputs (the ones whose
values every other page reads) and at the end; the full one gives every input every value and revisits
every page after each input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_browser import (RENDER_TIMEOUT_MS, ROOT, SETTLED, chromium_tab, go_to, require_chromium, serving,
                          wait_rendered)

from explorer.pages import PAGES

pytestmark = pytest.mark.browser

BAD_VALUES = ("1e999", "-1", "abc", "nan", "0", "", "99999999999999999999999TiB")
NUMBER_SHARE = 2
"""Bad values each number input gets in the default run (rotating through :data:`BAD_VALUES`)."""
REVISIT_AFTER = "schedule"
"""The page after whose inputs the default run visits every page (its budget, options and time limit are read
by every other page)."""
STREAMLIT_NOTES = ("Couldn't find fragment with id", "The fragment with id")
"""Streamlit's own notes about a polling fragment whose rerun arrived after a full rerun replaced it ("no action
is required", it says): the only log lines allowed."""
BROKEN_SELECTOR = '[data-testid="stException"]'
BROKEN_TEXTS = ("Traceback (most recent call last)", "Something went wrong in")
SERVER_LOG = "streamlit-fuzz.log"
KEY_ATTEMPTS = 3
INPUTS = ('[data-testid="stTextInput"] input, [data-testid="stNumberInput"] input, '
          '[data-testid="stSlider"] input[type="range"]')


@dataclass
class Server:
    """A server started for these tests, and how much of its log has been read."""

    url: str
    log: Path
    read: int = 0
    seen: list[str] = field(default_factory=list)

    def new_log_lines(self) -> list[str]:
        text = self.log.read_text(errors="replace")
        fresh, self.read = text[self.read:], len(text)
        return [line for line in fresh.splitlines() if line.strip() and not any(n in line for n in STREAMLIT_NOTES)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_chromium()
    uploads = tmp_path_factory.mktemp("fuzz-uploads")
    with serving(SERVER_LOG, ("--logger.level", "warning"), {"REMAT_UPLOAD_DIR": str(uploads)}) as url:
        started = Server(url, ROOT / "test-output" / SERVER_LOG)
        started.new_log_lines()  # the banner: nothing after it may appear
        yield started


@pytest.fixture(scope="module")
def tab(server):
    with chromium_tab(1024, 768) as opened:
        opened.goto(server.url)
        wait_rendered(opened)
        yield opened


def assert_sound(tab, server: Server, after: str) -> None:
    """No exception element, no traceback or safety-net text on the page, nothing new in the server log."""
    broken = tab.locator(BROKEN_SELECTOR)
    assert not broken.count(), f"after {after}: an exception is shown: {broken.first.inner_text()[:400]}"
    text = tab.locator('[data-testid="stAppViewContainer"]').inner_text()
    for marker in BROKEN_TEXTS:
        assert marker not in text, f"after {after}: the page shows {marker!r}: " \
                                   f"{text[text.index(marker):text.index(marker) + 400]}"
    logged = server.new_log_lines()
    assert not logged, f"after {after}: the server logged:\n" + "\n".join(logged[:40])


def open_page(tab, entry) -> None:
    """Go to the page unless the tab shows it already (clicking its own link would rerun it while the test acts)."""
    if tab.locator('[data-testid="stMainBlockContainer"] h1').first.inner_text() != entry.title:
        go_to(tab, entry)


def visit_every_page(tab, server: Server, after: str) -> None:
    for entry in PAGES:
        open_page(tab, entry)
        assert_sound(tab, server, f"{after}, on the {entry.title} page")


def settle(tab) -> None:
    """Until the rerun an input started (if any) has finished."""
    tab.wait_for_timeout(300)
    tab.wait_for_function(SETTLED, timeout=RENDER_TIMEOUT_MS)


def views(tab) -> int:
    """How many tabs the page has (1 when none): each is searched for inputs in turn."""
    return max(tab.locator('[data-testid="stMainBlockContainer"] [data-testid="stTab"]').count(), 1)


def show_view(tab, index: int) -> None:
    """Open tab ``index`` of the page (if it has tabs) and every expander on it."""
    tabs = tab.locator('[data-testid="stMainBlockContainer"] [data-testid="stTab"]')
    if tabs.count():
        tabs.nth(index).click()
        tab.wait_for_timeout(200)
    closed = tab.locator('[data-testid="stMainBlockContainer"] details:not([open]) > summary')
    for _ in range(closed.count()):
        closed.first.click()
        tab.wait_for_timeout(150)


def inputs(tab):
    """The visible, enabled text inputs, number inputs and sliders of the page, in order."""
    found = tab.locator(f'[data-testid="stMainBlockContainer"] :is({INPUTS})')
    return [found.nth(i) for i in range(found.count()) if found.nth(i).is_visible() and found.nth(i).is_enabled()]


def describe(element) -> str:
    kind = {"range": "slider", "number": "number input", "text": "text input"}.get(element.get_attribute("type"),
                                                                                    "input")
    return f"{kind} {element.get_attribute('aria-label') or '?'!r}"


def type_into(tab, element, value: str) -> None:
    """Replace the input's text by ``value`` as a user types it (the browser drops what a number input refuses),
    then leave the input, which commits it."""
    element.focus()  # not a click: a form's "Press Enter to submit" hint may lie over the next input
    element.press("Control+a")
    element.press("Backspace")
    if value:
        element.press_sequentially(value, delay=5)
    element.press("Tab")
    settle(tab)


def slide_to_both_ends(tab, element) -> None:
    """Home, then End: the budget slider ends above the checkpoint-all peak, where every solver fits and every
    page shows its inputs (below the lower bound the Timeline and Why pages only say that nothing fits). A key
    pressed while the slider is being redrawn is lost: pressed again until the slider is at that end."""
    for key, end in (("Home", "min"), ("End", "max")):
        for _ in range(KEY_ATTEMPTS):
            element.focus()
            tab.keyboard.press(key)
            settle(tab)
            if float(element.input_value()) == float(element.get_attribute(end)):
                break
        else:
            raise AssertionError(f"{describe(element)} did not move to its {end} after {KEY_ATTEMPTS} presses of {key}")


def fuzz_page(tab, server: Server, entry, values_for, revisit_after_each: bool, reached: list[str]) -> None:
    """Every input of the page given its bad values (``values_for(n, is_text)`` for the n-th input of the run),
    sliders moved to both ends; each input reached is added to ``reached``."""
    open_page(tab, entry)
    for view in range(views(tab)):
        open_page(tab, entry)
        show_view(tab, view)
        index = 0
        while index < len(found := inputs(tab)):
            element = found[index]
            what = f"{describe(element)} on the {entry.title} page"
            if element.get_attribute("type") == "range":
                slide_to_both_ends(tab, element)
                assert_sound(tab, server, f"moving {what} to both ends")
            else:
                for value in values_for(len(reached), element.get_attribute("type") == "text"):
                    target = inputs(tab)[index] if index < len(inputs(tab)) else None
                    if target is None:
                        break
                    type_into(tab, target, value)
                    assert_sound(tab, server, f"typing {value!r} into {what}")
            reached.append(what)
            index += 1
            if revisit_after_each:
                visit_every_page(tab, server, f"fuzzing {what}")
                open_page(tab, entry)
                show_view(tab, view)


def sampled(n: int, is_text: bool) -> tuple[str, ...]:
    """The default run's values for the n-th input: all of them for text, else a share of :data:`NUMBER_SHARE`,
    starting where the previous input's share ended."""
    if is_text:
        return BAD_VALUES
    return tuple(BAD_VALUES[(n * NUMBER_SHARE + i) % len(BAD_VALUES)] for i in range(NUMBER_SHARE))


def run_fuzz(tab, server: Server, values_for, revisit_after_each: bool) -> None:
    visit_every_page(tab, server, "opening the app")
    reached: list[str] = []
    for entry in PAGES:
        fuzz_page(tab, server, entry, values_for, revisit_after_each, reached)
        if not revisit_after_each and entry.url_path == REVISIT_AFTER:
            visit_every_page(tab, server, f"fuzzing the {entry.title} page")
    visit_every_page(tab, server, "fuzzing every page")
    expected = {"slider 'Memory budget' on the Schedule page", "text input 'Type a budget' on the Schedule page",
                "number input 'Time limit per solve (s)' on the Schedule page", "number input 'Layers' on the Model page",
                "slider 'Budget B (A is the current budget)' on the Why recomputed? page",
                "number input 'Step' on the Timeline page"}
    assert expected <= set(reached), f"the fuzz reached only {reached}: the selectors no longer find the inputs"


@pytest.mark.slow  # a minute of fuzzing every input
def test_odd_values_in_every_input_break_no_page(tab, server):
    run_fuzz(tab, server, sampled, revisit_after_each=False)


@pytest.mark.slow
def test_every_odd_value_in_every_input_breaks_no_page(tab, server):
    run_fuzz(tab, server, lambda n, is_text: BAD_VALUES, revisit_after_each=True)


def graph_document(nodes: list[dict], edges=()) -> str:
    return json.dumps({"format": "remat-graph", "version": 1, "name": "odd", "nodes": nodes, "edges": list(edges)})


PATHOLOGICAL = {
    "huge-node.json": (graph_document([{"id": "conv", "mem": 10**40, "cost": 1}]), "node 'conv': mem"),
    "huge-cost.json": (graph_document([{"id": "mm", "mem": 4, "cost": 1e300}]), "node 'mm': cost"),
    "negative.json": (graph_document([{"id": "relu", "mem": -8, "cost": 1}]), "node 'relu': mem"),
    "nan.json": (graph_document([{"id": "add", "mem": 8, "cost": float("nan")}]), "node 'add': cost"),
    "one-node.json": (graph_document([{"id": "only", "mem": 100, "cost": 1}]), None),
    "two-nodes.json": (graph_document([{"id": "a", "mem": 100, "cost": 1, "kind": "forward"},
                                       {"id": "b", "mem": 50, "cost": 2, "kind": "backward"}], [["a", "b"]]), None),
}


def current_model(tab) -> str:
    """The model's name in the sidebar."""
    return tab.locator('[data-testid="stSidebar"] strong').first.inner_text()


def upload_file(tab, name: str, text: str) -> None:
    """Upload ``text`` as file ``name`` on the Model page; returns once the page says what became of it."""
    open_page(tab, PAGES[0])
    tab.get_by_role("tab", name="Upload a file").click()
    tab.locator('[data-testid="stFileUploaderDropzone"]').wait_for(timeout=RENDER_TIMEOUT_MS)
    tab.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        files=[{"name": name, "mimeType": "application/json", "buffer": text.encode()}])
    tab.locator('[data-testid="stMainBlockContainer"] :is([data-testid="stAlertContentError"], '
                '[data-testid="stAlertContentSuccess"])', has_text=name).first.wait_for(timeout=RENDER_TIMEOUT_MS)
    wait_rendered(tab)


def test_pathological_uploads_are_refused_with_their_reason_and_the_model_stays(tab, server):
    """Each refused upload leaves the session as it was (checked), so one visit to every page after them all
    sees what a visit after each would."""
    before = current_model(tab)
    for name, (text, refusal) in PATHOLOGICAL.items():
        if refusal is None:
            continue
        upload_file(tab, name, text)
        error = tab.locator('[data-testid="stMainBlockContainer"] [data-testid="stAlertContentError"]').first
        assert f"Could not load {name}" in error.inner_text() and refusal in error.inner_text(), error.inner_text()
        assert "Still exploring" in error.inner_text() and current_model(tab) == before
        assert_sound(tab, server, f"uploading {name}")
    visit_every_page(tab, server, "the refused uploads")


@pytest.mark.parametrize("name", [name for name, (_, refusal) in PATHOLOGICAL.items() if refusal is None])
def test_the_smallest_graphs_upload_and_work_on_every_page(tab, server, name):
    upload_file(tab, name, PATHOLOGICAL[name][0])
    success = tab.locator('[data-testid="stMainBlockContainer"] [data-testid="stAlertContentSuccess"]').first
    assert f"Loaded {name}" in success.inner_text() and current_model(tab) == "odd"
    assert_sound(tab, server, f"uploading {name}")
    visit_every_page(tab, server, f"uploading {name}")
