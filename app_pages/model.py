"""Model: choose what to explore (a zoo model, an uploaded file, a generated graph) and see its sizes."""


import streamlit as st

from explorer import state
from explorer.state.models import (CHAIN_ACTIVATION_MIB, CHAIN_LAYERS, DAG_EDGE_PROBABILITY, DAG_NODES, DAG_SEED,
                                   LEVEL_CHOICES, MAX_UPLOAD_BYTES, accept_upload, activation_bytes, failure_message,
                                   generated_random_dag, generated_training_chain, upload_suffixes)
from explorer.state.zoo import zoo_form
from explorer.widgets.exports import graph_download
from explorer.widgets.text import plain, tensor_name
from explorer.widgets.rows import figure_metric, wrapping_row
from remat_core.analysis import graph_summary, kernel_memory_rows
from remat_core.graph import format_bytes
from remat_core.viz import module_memory_figure


UPLOAD_MARKER = "model_upload_marker"
UPLOAD_ERROR = "model_upload_error"

st.title("Model")
st.caption("A training graph: one node per tensor-producing op, forward and backward. Pick one, upload one, or "
           "generate one; every other page works on the model chosen here.")
if message := state.pop_notice():
    st.success(plain(message), icon=":material/check_circle:")

zoo_tab, upload_tab, generated_tab = st.tabs(["Model zoo", "Upload a file", "Generated graph"])

with zoo_tab:
    try:
        traced = zoo_form()
    except Exception as e:  # noqa: BLE001 - whatever broke, say so and keep the model
        st.error(f"Could not trace that model: {plain(failure_message(e))}  \n"
                 f"Still exploring **{plain(state.graph().name)}**.", icon=":material/error:")
    else:
        if traced is not None:
            state.set_model(traced)
            state.notice(f"Traced {traced.graph.name}: {len(traced.graph):,} nodes.")
            st.rerun()

with upload_tab:
    suffixes = upload_suffixes()
    uploaded = st.file_uploader(
        "Graph file", key="w_upload",
        help=f"A remat-graph JSON, a Checkmate/Moccasin node-link JSON, or a model export (accepted: "
             f"{', '.join(suffixes)}); at most {format_bytes(MAX_UPLOAD_BYTES)}. Files are parsed, never executed, "
             f"and kept on this server so that a reload or a link (model=its content hash) opens them again.")
    settings = st.columns(2)
    add_backward = settings[0].toggle("Add the backward pass to forward-only graphs", value=True,
                                      key="w_upload_backward",
                                      help="ONNX files and forward JSON graphs hold the forward pass only; "
                                           "rematerialization is about training graphs.")
    pt2_level = settings[1].selectbox("Level for .pt2 exports", LEVEL_CHOICES, key="w_upload_level")
    if uploaded is not None:
        marker = (uploaded.file_id, uploaded.name, uploaded.size, add_backward, pt2_level)
        if st.session_state.get(UPLOAD_MARKER) != marker:
            st.session_state[UPLOAD_MARKER] = marker
            try:
                loaded, not_kept = accept_upload(uploaded.name, uploaded.getvalue(), add_backward, pt2_level)
            except Exception as e:  # noqa: BLE001 - whatever broke, say so and keep the model
                st.session_state[UPLOAD_ERROR] = failure_message(e)
            else:
                st.session_state[UPLOAD_ERROR] = None
                state.set_model(loaded)
                state.notice(f"Loaded {uploaded.name}: {len(loaded.graph):,} nodes"
                             + (f"; {not_kept}." if not_kept else "."))
                st.rerun()
        if st.session_state.get(UPLOAD_ERROR):
            st.error(f"Could not load {plain(uploaded.name)}: {plain(st.session_state[UPLOAD_ERROR])}  \n"
                     f"Still exploring **{plain(state.graph().name)}**.", icon=":material/error:")

with generated_tab:
    family = st.radio("Family", ["Training chain", "Random DAG"], horizontal=True, key="w_generated_family",
                      help="Training chain: n layers forward, a loss, n gradient ops (the ladder of a plain "
                           "network). Random DAG: a forward-only graph with random edges.")
    with st.form("generated_form", border=False):
        if family == "Training chain":
            left, right = st.columns(2)
            layers = left.number_input("Layers", min_value=CHAIN_LAYERS.low, max_value=CHAIN_LAYERS.high,
                                       value=CHAIN_LAYERS.default, step=1, key="w_generated_layers")
            mem_mib = right.number_input("MiB per activation", min_value=CHAIN_ACTIVATION_MIB.low,
                                         max_value=CHAIN_ACTIVATION_MIB.high, value=CHAIN_ACTIVATION_MIB.default,
                                         key="w_generated_mib")
        else:
            left, middle, right = st.columns(3)
            nodes = left.number_input("Nodes", min_value=DAG_NODES.low, max_value=DAG_NODES.high,
                                      value=DAG_NODES.default, step=1, key="w_generated_nodes")
            probability = middle.number_input("Edge probability", min_value=DAG_EDGE_PROBABILITY.low,
                                              max_value=DAG_EDGE_PROBABILITY.high, value=DAG_EDGE_PROBABILITY.default,
                                              step=0.01, key="w_generated_probability")
            seed = right.number_input("Seed", min_value=DAG_SEED.low, max_value=DAG_SEED.high,
                                      value=DAG_SEED.default, step=1, key="w_generated_seed")
        if st.form_submit_button("Use this graph", type="primary"):
            if family == "Training chain":
                state.set_model(generated_training_chain(int(layers), activation_bytes(mem_mib)))
            else:
                state.set_model(generated_random_dag(int(nodes), float(probability), int(seed)))
            state.notice(f"Now exploring {state.graph().name}.")
            st.rerun()

model = state.model()
graph = model.graph
summary = graph_summary(graph)
st.subheader(plain(summary.name))
st.caption(plain(model.origin))
figures = wrapping_row()
figure_metric(figures, "Nodes", f"{summary.nodes:,}", f"{summary.edges:,} edges")
figure_metric(figures, "Parameters", format_bytes(summary.param_bytes),
       f"{model.parameters:,} values" if model.parameters else f"{summary.nodes_by_kind.get('param', 0)} tensors")
figure_metric(figures, "Activations", format_bytes(summary.activation_bytes), "all computed tensors")
figure_metric(figures, "Checkpoint-all peak", format_bytes(summary.checkpoint_all_peak), "no recomputation")
figure_metric(figures, "Lower bound", format_bytes(summary.lower_bound), "no schedule fits below")

left, right = st.columns([1, 2])
with left:
    st.markdown("**Nodes by kind**")
    st.dataframe([{"kind": k, "nodes": n, "bytes": format_bytes(summary.bytes_by_kind[k])}
                  for k, n in summary.nodes_by_kind.items()], hide_index=True, width="stretch")
    st.markdown(f"Pinned (always resident): **{format_bytes(summary.pinned_bytes)}**: parameters "
                f"{format_bytes(summary.param_bytes)}, buffers {format_bytes(summary.buffer_bytes)}, inputs "
                f"{format_bytes(summary.input_bytes)}.")
    graph_download(graph, key="model_download")
    if summary.transient_nodes or summary.multi_output_calls:
        st.markdown("**What kernels hold while they run**")
        st.caption(f"{summary.transient_nodes:,} ops allocate temporaries or workspace beyond their output (up to "
                   f"{format_bytes(summary.largest_transient)} at once), measured when the model was traced; "
                   f"{summary.multi_output_calls:,} calls compute several outputs at once and hold all of them. "
                   f"Every peak on these pages counts them.")
        st.dataframe([{"tensor": tensor_name(graph, row["node"]), "temporaries": format_bytes(row["transient"]),
                       "output": format_bytes(row["output"]),
                       "call's other outputs": format_bytes(row["siblings_bytes"]) if row["call_outputs"] > 1 else "-"}
                      for row in kernel_memory_rows(graph, 30)], hide_index=True, width="stretch", height=220)
with right:
    st.markdown("**Memory by module**")
    if summary.has_modules:
        depth = st.slider("Module depth", 1, 4, 1, key="w_module_depth",
                          help="How many parts of the module path make a group (layer3 vs layer3.1).")
        st.plotly_chart(module_memory_figure(graph, depth), key="model_modules")
    else:
        st.caption("This graph's nodes carry no module paths (generated and most JSON graphs do not); "
                   "memory by kind instead.")
        st.plotly_chart(module_memory_figure(graph, 1), key="model_modules")
