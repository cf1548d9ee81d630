"""The Streamlit side of Remat Explorer: the frame, the page list, and what the pages share.

Pages (``app_pages/*.py``) stay thin: they read the current model, budget and solver from
:mod:`explorer.state`, get results through :mod:`explorer.jobs`, draw cached figures from
:mod:`explorer.figures` (built by :mod:`remat_core.viz`), and use the widgets in
:mod:`explorer.widgets`. :mod:`explorer.frame` draws what every page shares, :mod:`explorer.safety` is the
net under every page, fragment and callback, and :mod:`explorer.pages` lists the pages. All the logic
lives in ``remat_core``, which never imports Streamlit.
"""
