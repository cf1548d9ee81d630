"""Every page on a laptop screen (1024x768, sidebar open) in chromium: no button text is cut (nor a button
clipped by its container, as a segmented control's last option can be), no control is
hidden behind another or off the screen, and no text is cut with an ellipsis. Screenshots land in
``test-output/browser/1024-<page>.png``. Serving and waiting as in :mod:`test_browser`."""

from __future__ import annotations

import pytest
from test_browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, assert_no_error, wait_rendered  # noqa: F401

from explorer.pages import PAGES

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1024, "height": 768}
LAYOUT_CHECK = """() => {
  const app = document.querySelector('[data-testid="stAppViewContainer"]');
  const shown = e => { const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && e.checkVisibility({opacityProperty: true, visibilityProperty: true}); };
  const name = e => (e.innerText || e.getAttribute('aria-label') || e.value || e.tagName).toString().trim().slice(0, 40);
  const found = {cut_buttons: [], covered: [], ellipsis: []};
  const clipper = e => {  // the nearest container that hides what sticks out of it sideways
    for (let a = e.parentElement; a && a !== app; a = a.parentElement)
      if (getComputedStyle(a).overflowX !== 'visible') return a;
    return null;
  };
  for (const b of app.querySelectorAll('button')) {
    if (!shown(b) || b.closest('.js-plotly-plot')) continue;
    if ([b, ...b.querySelectorAll('*')].some(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1
                                              && getComputedStyle(e).overflow !== 'visible'))
      found.cut_buttons.push(name(b));
    if (b.getBoundingClientRect().right > window.innerWidth + 1) found.cut_buttons.push(name(b) + ' (off the screen)');
    const box = clipper(b);
    if (box && (b.getBoundingClientRect().right > box.getBoundingClientRect().right + 1
                || b.getBoundingClientRect().left < box.getBoundingClientRect().left - 1))
      found.cut_buttons.push(name(b) + ' (clipped by its container)');
  }
  for (const e of app.querySelectorAll('*')) {
    if (e.closest('.js-plotly-plot') || !e.clientWidth || !shown(e)) continue;
    if (getComputedStyle(e).textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth + 1) found.ellipsis.push(name(e));
  }
  const controls = [...app.querySelectorAll('button, input, textarea, [role="slider"], [data-baseweb="select"], a[href]')]
    .filter(e => shown(e) && !e.closest('.js-plotly-plot') && !e.closest('[data-testid="stTooltipContent"]'));
  for (const c of controls) {
    c.scrollIntoView({block: 'center', inline: 'nearest'});
    const r = c.getBoundingClientRect();
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    if (x < 0 || x > window.innerWidth || y < 0 || y > window.innerHeight) continue;
    const top = document.elementFromPoint(x, y);
    if (top && !c.contains(top) && !top.contains(c) && !(c.closest('label') && c.closest('label').contains(top)))
      found.covered.push(`${name(c)} under "${(top.innerText || top.tagName).trim().slice(0, 40)}"`);
  }
  return found;
}"""


@pytest.fixture(scope="module")
def laptop(app_url):  # noqa: F811
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=LAPTOP)
        yield context.new_page()
        context.close()
        browser.close()


@pytest.fixture(scope="module")
def layouts(app_url, laptop):  # noqa: F811
    """Each page opened at 1024x768 (Learn also at a later step), its layout checked and pictured."""
    found = {}
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for entry in PAGES:
        laptop.goto(f"{app_url}/{entry.url_path}")
        wait_rendered(laptop)
        if entry.url_path in ("timeline", "learn"):
            laptop.wait_for_selector(".js-plotly-plot", timeout=60_000)
        if entry.url_path == "learn":
            for _ in range(5):
                laptop.get_by_role("button", name="Next").click()
                wait_rendered(laptop)
        assert_no_error(laptop, entry.title)
        found[entry.url_path] = laptop.evaluate(LAYOUT_CHECK)
        laptop.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollTo(0, 0)")
        laptop.screenshot(path=str(SCREENSHOTS / f"1024-{entry.url_path}.png"))
    return found


PAGE_PATHS = [e.url_path for e in PAGES]


@pytest.mark.parametrize("page", PAGE_PATHS)
def test_no_button_is_cut_and_no_control_hidden_at_1024x768(layouts, page):
    found = layouts[page]
    assert not found["cut_buttons"], f"{page}: button text cut: {found['cut_buttons']}"
    assert not found["covered"], f"{page}: controls hidden behind others: {found['covered']}"


@pytest.mark.parametrize("page", PAGE_PATHS)
def test_no_text_is_cut_at_1024x768(layouts, page):
    assert not layouts[page]["ellipsis"], f"{page}: text cut with an ellipsis: {layouts[page]['ellipsis']}"
