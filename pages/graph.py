"""Graph: the DAG left to right (forward then backward), searchable, at op or module level or around
one node; beside it the decompositions the treewidth and pathwidth solvers recurse on."""


import streamlit as st

from explorer import state
from explorer.figures.graph import dag_page
from explorer.frame import require_entry
from explorer.widgets.decompositions import decomposition_figures, selected_bag_vertices
from explorer.widgets.exports import graph_download
from explorer.widgets.text import plain
from remat_core.analysis import MAX_DRAWN_NODES, graph_summary
from remat_core.decompose import PATH_METHODS, TREE_HEURISTICS
from remat_core.viz import KIND_COLORS

require_entry()

LEVELS = {"op": "Every op", "module": "Module level", "neighbourhood": "Around one node"}
TREE_METHOD_KEY, PATH_METHOD_KEY = "w_graph_tree_method", "w_graph_path_method"
DEFAULT_METHODS = {"tree": "min_degree", "path": "vertex_separation"}

st.title("Graph")
graph = state.graph()
summary = graph_summary(graph)
too_big = len(graph) > MAX_DRAWN_NODES

controls = st.columns([3, 2, 1, 1])
with controls[0]:
    default_level = "op" if not too_big else ("module" if summary.has_modules else "neighbourhood")
    level = st.segmented_control("View", list(LEVELS), default=default_level, format_func=LEVELS.get,
                                 key="w_graph_level", required=True)
with controls[1]:
    names = list(graph.topological_order())
    found = st.selectbox("Find a node", names, index=None, placeholder="type a name…", key="w_graph_find",
                         format_func=lambda n: graph.node(n).display_name + ("" if graph.node(n).label is None
                                                                             else f" ({n})"))
with controls[2]:
    depth = st.number_input("Module depth", min_value=1, max_value=6, value=1, key="w_graph_depth",
                            disabled=level != "module")
with controls[3]:
    hops = st.number_input("Hops", min_value=1, max_value=8, value=2, key="w_graph_hops",
                           disabled=level != "neighbourhood")

if too_big:
    fallback = "module" if summary.has_modules else "neighbourhood"
    st.error(f"{len(graph):,} nodes is too many to draw op by op (the limit is {MAX_DRAWN_NODES:,}: more would "
             f"freeze the browser). Use the module level or look around one node"
             + (f"; showing the {LEVELS[fallback].lower()} instead." if level == "op" else "."),
             icon=":material/warning:")
    if level == "op":
        level = fallback
if level == "module" and not summary.has_modules:
    st.info("This graph's nodes carry no module paths: the module level has one group per kind.")
centre = found if found is not None else graph.topological_order()[0]
if level == "neighbourhood" and found is None:
    st.caption(f"Showing the neighbourhood of {plain(graph.node(centre).display_name)}; find a node to move.")

methods = {"tree": st.session_state.get(TREE_METHOD_KEY, DEFAULT_METHODS["tree"]),
           "path": st.session_state.get(PATH_METHOD_KEY, DEFAULT_METHODS["path"])}
bag = selected_bag_vertices(graph, methods)
if bag and level == "neighbourhood":
    st.caption("The highlighted bag's vertices outside this neighbourhood are not drawn.")
html, drawn = dag_page(graph.content_hash, graph, level, int(depth), centre if level == "neighbourhood" else None,
                       int(hops), bag or ((found,) if found else ()), found)
if drawn > MAX_DRAWN_NODES:
    st.error(f"This view still has {drawn:,} nodes, more than the {MAX_DRAWN_NODES:,} the browser can draw; lower "
             f"the module depth or look around one node.")
else:
    st.iframe(html, height=640, alt=f"DAG of {graph.name}")
legend = " ".join(f'<span style="color:{color}">●</span> {kind}' for kind, color in KIND_COLORS.items()
                  if kind in summary.nodes_by_kind)
st.markdown(f"{legend} &nbsp; ■ pinned (parameters, inputs) · size by memory · hover for op, shape, bytes, cost, "
            f"module · scroll to zoom (long graphs open on their first layers), drag to pan", unsafe_allow_html=True)
graph_download(graph, key="graph_download")

st.subheader("Decompositions")
st.caption("Of the undirected skeleton, parameters and inputs left out (they are always resident). The "
           "treewidth solver recurses on the tree decomposition's separator tree, the pathwidth solvers on "
           "the path decomposition.")
left, right = st.columns(2)
left.selectbox("Tree decomposition", TREE_HEURISTICS, key=TREE_METHOD_KEY,
               index=TREE_HEURISTICS.index(DEFAULT_METHODS["tree"]),
               help="min_degree and min_fill are networkx heuristics; exact searches for the optimum on "
                    "small graphs.")
right.selectbox("Path decomposition", PATH_METHODS, key=PATH_METHOD_KEY,
                index=PATH_METHODS.index(DEFAULT_METHODS["path"]),
                help="vertex_separation: a width-minimising vertex ordering; from_tree: read off the tree "
                     "decomposition; best: the narrower of both.")
decomposition_figures(graph, methods, key="graph")
