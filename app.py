"""Remat Explorer, the browser app: ``streamlit run app.py``.

The entry script routes to the page chosen and draws the frame every page shares: page config,
the link's state and the session's defaults (a built-in model, a solver, a budget), the sidebar, and
the safety net the page runs in (``explorer/frame.py``). The pages and their order are listed once,
in ``explorer/pages.py``.

Everything, imports included, is guarded by ``__name__ == "__main__"``: Streamlit runs this file as
``__main__``, and the explorer's worker processes (started with ``spawn``) run the parent's main
file again under another name, where it must do nothing (and load nothing they do not need).
"""

if __name__ == "__main__":
    import streamlit as st

    from explorer.frame import frame, run_page
    from explorer.pages import DEFAULT_PAGE, PAGES, ROOT_TITLE, entry_titled

    def root() -> None:
        """``/``: the default page, at its own name, with the link's query."""
        st.switch_page(DEFAULT_PAGE, query_params=st.query_params.to_dict())

    navigation = st.navigation([st.Page(root, title=ROOT_TITLE, default=True, visibility="hidden"),
                                *(st.Page(p.path, title=p.title, icon=p.icon, url_path=p.url_path) for p in PAGES)])
    if navigation.title == ROOT_TITLE:
        navigation.run()
    entry = entry_titled(navigation.title)
    frame(entry.url_path, schedule_summary=not entry.draws_schedule_summary)
    run_page(navigation, entry.title)
