"""The explorer's pages, their labels, icons and order: the one list ``app.py`` navigates over."""

from __future__ import annotations

from typing import NamedTuple


class PageEntry(NamedTuple):
    """A page: its file, title, icon, URL, and whether it draws the sidebar's schedule block itself
    (the Schedule page does, from its budget fragment)."""

    path: str
    title: str
    icon: str
    url_path: str
    draws_schedule_summary: bool = False


PAGES = (
    PageEntry("app_pages/model.py", "Model", ":material/deployed_code:", "model"),
    PageEntry("app_pages/graph.py", "Graph", ":material/account_tree:", "graph"),
    PageEntry("app_pages/schedule.py", "Schedule", ":material/tune:", "schedule", draws_schedule_summary=True),
    PageEntry("app_pages/timeline.py", "Timeline", ":material/timeline:", "timeline"),
    PageEntry("app_pages/why.py", "Why recomputed?", ":material/help:", "why"),
    PageEntry("app_pages/learn.py", "Learn", ":material/school:", "learn"),
    PageEntry("app_pages/distributed.py", "Distributed", ":material/hub:", "distributed"),
)
DEFAULT_PAGE = "app_pages/model.py"
"""Where the app's root (``/``) leads: Streamlit serves its default page at ``/`` only, so the root is a hidden
page of its own that switches to this one, keeping the link's query, and every page answers at its name."""
ROOT_TITLE = "Remat Explorer"


def entry_titled(title: str) -> PageEntry:
    """The page with this title (``st.navigation`` hands back the page chosen, with its title)."""
    for entry in PAGES:
        if entry.title == title:
            return entry
    raise KeyError(f"no page titled {title!r}")


def page_path(url_path: str) -> str:
    """The file of the page served at ``url_path`` (for ``st.switch_page``)."""
    for entry in PAGES:
        if entry.url_path == url_path:
            return entry.path
    raise KeyError(f"no page at {url_path!r}; pages: {', '.join(e.url_path for e in PAGES)}")
