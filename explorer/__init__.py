"""The Streamlit side of Remat Explorer: session state, caches, shared widgets and the page list.

Pages (``pages/*.py``) stay thin: they read the current model, budget and solver from
:mod:`explorer.state`, get results through the caches in :mod:`explorer.cache`, draw figures from
:mod:`remat_core.viz`, and use the widgets in :mod:`explorer.widgets`. All the logic lives in
``remat_core``, which never imports Streamlit.
"""
