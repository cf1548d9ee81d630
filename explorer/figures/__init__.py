"""Figures and HTML the pages draw, built by :mod:`remat_core.viz` and cached here by the graph's content
hash (``st.cache_data`` with bounds; the graph is passed as ``_graph``)."""
