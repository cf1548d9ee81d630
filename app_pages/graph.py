"""Graph: the graph by levels of detail (modules open on a click), coloured by the current schedule or one
of its steps, searchable; beside it the decompositions the treewidth and pathwidth solvers recurse on."""


import streamlit as st

from explorer import state
from explorer.widgets.decompositions import (chosen_methods, decomposition_figures, method_pickers,
                                            selected_bag_vertices)
from explorer.widgets.exports import graph_download
from explorer.widgets.graph_view import graph_view_panel


st.title("Graph")
graph = state.graph()
graph_view_panel(graph, marked_ids=selected_bag_vertices(graph, chosen_methods()))
graph_download(graph, key="graph_download")

st.subheader("Decompositions")
st.caption("Of the undirected skeleton, parameters and inputs left out (they are always resident). The "
           "treewidth solver recurses on the tree decomposition's separator tree, the pathwidth solvers on "
           "the path decomposition.")
decomposition_figures(graph, method_pickers(), key="graph")
