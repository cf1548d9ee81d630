"""Remat Explorer: the Streamlit entry page (the full explorer grows in pages/)."""

import streamlit as st

from remat_core import checkpoint_all_peak, format_bytes, memory_lower_bound
from remat_core.generators import training_chain

st.set_page_config(page_title="Remat Explorer", layout="wide")
st.title("Remat Explorer")
st.caption("See and solve tensor rematerialization on training graphs.")

graph = training_chain(12, mem=4 * 2**20)
cols = st.columns(4)
cols[0].metric("Model", graph.name)
cols[1].metric("Nodes", len(graph))
cols[2].metric("Checkpoint-all peak", format_bytes(checkpoint_all_peak(graph)))
cols[3].metric("Lower bound", format_bytes(memory_lower_bound(graph)))
