"""Distributed: a GNN trained full-batch on a graph split across workers, vanilla domain-parallel against SAR
(sequential aggregation and rematerialization): the partition, each worker's simulated memory, and a run of the real
workers on this machine with measured beside simulated."""


import streamlit as st

from explorer import safety
from explorer.figures.distributed import peaks_figure, timelines_figure
from explorer.jobs.distributed import cancel_run, find_run, run_summary, start_run
from explorer.state.gnn import (GRAPH_SUFFIXES, MAX_WORKERS, GnnChoice, current_choice, halo_table, keep_upload,
                                load_graph, load_partition, model_for, set_choice, simulated_modes)
from explorer.widgets.text import plain
from remat_core import GraphError
from remat_core.frontends.gnn import GNN_MODELS, PARTITIONERS, SKEWS
from remat_core.graph import format_bytes

POLL_SECONDS = 1.0
MODE_WORDS = {"vanilla": "vanilla (every remote row of a layer fetched at once, kept for the backward)",
              "sar": "SAR (one remote worker at a time, freed; fetched again in the backward where needed)",
              "sar + chunks": "SAR with the attention's edges in chunks"}

st.title("Distributed")
st.caption("Graphs too big for one machine are split across workers; each aggregates its nodes' neighbours, "
           "fetching the rows other workers own. Vanilla full-batch training fetches a layer's remote rows at once "
           "and keeps them for the backward pass; SAR (Mostafa, MLSys 2022) fetches one worker's rows at a time, "
           "frees them, and fetches them again in the backward pass where it needs them: rematerialization across "
           "machines. Every figure here is the one simulator's, on each worker's recorded step.")

choice, problems = current_choice()
for problem in problems:
    st.warning(f"From the link: {plain(problem)}; using the default instead.", icon=":material/link_off:")

with st.container(border=True):
    left, middle, right = st.columns(3)
    model_name = left.selectbox("GNN", sorted(GNN_MODELS), index=sorted(GNN_MODELS).index(choice.model),
                                help="GraphSAGE (mean), GCN, or GAT (4 attention heads), 2 layers.")
    workers = middle.slider("Workers", 1, MAX_WORKERS, choice.workers, help="One partition per worker.")
    partitioner = right.selectbox("Partitioner", PARTITIONERS, index=PARTITIONERS.index(choice.partitioner),
                                  help="METIS (pymetis, balancing the edges each worker aggregates) or random.")
    width = left.select_slider("Hidden width", [16, 32, 64, 128, 256], value=choice.width
                               if choice.width in (16, 32, 64, 128, 256) else 64)
    with middle.popover("Generate a graph", icon=":material/casino:", width="stretch"):
        with st.form("distributed_generate", border=False):
            nodes = st.number_input("Nodes", 100, 1_000_000, 20_000, step=1000)
            edges = st.number_input("Edges (both ways)", 200, 5_000_000, 200_000, step=10_000)
            skew = st.radio("Degrees", list(SKEWS), index=list(SKEWS).index("uniform"), horizontal=True,
                            help="graph500: R-MAT's power-law skew (isolated nodes dropped); uniform: no skew.")
            generated = st.form_submit_button("Generate", type="primary")
        if generated:
            set_choice(graph=f"rmat:nodes={int(nodes)},edges={int(edges)},skew={skew}")
            st.rerun()
    upload = st.file_uploader("Or upload a graph", type=[s.lstrip(".") for s in GRAPH_SUFFIXES],
                                 help="An edge list (two node ids a line), or .npz / .pt with edge_index (and x, y).")
    if upload is not None and st.session_state.get("distributed_upload") != upload.file_id:
        st.session_state["distributed_upload"] = upload.file_id
        try:
            spec = keep_upload(upload.name, upload.getvalue())
        except GraphError as e:
            st.error(f"{plain(str(e))} The graph shown is unchanged.", icon=":material/error:")
        else:
            set_choice(graph=spec)
            st.rerun()

choice = set_choice(model=model_name, workers=workers, partitioner=partitioner, width=width)

try:
    graph = load_graph(choice.graph)
    if workers > graph.nodes:
        raise GraphError(f"{workers} workers for {graph.nodes:,} nodes: use at most one worker per node")
    partition = load_partition(choice.graph, choice.workers, choice.partitioner)
except GraphError as e:
    st.error(f"{plain(str(e))}", icon=":material/error:")
    if st.button("Back to the default graph"):
        set_choice(graph=GnnChoice.graph)
        st.rerun()
    st.stop()

model = model_for(choice, graph)
summary = partition.summary()
described = graph.describe()
st.subheader("The partition")
cut, nodes_balance, edges_balance, degree = st.columns(4)
cut.metric("Edge cut", f"{summary['edge_cut']:.1%}", help="Edges whose ends live on different workers.")
nodes_balance.metric("Node balance", f"{summary['node_balance']:.2f}", help="Largest worker's nodes over the mean.")
edges_balance.metric("Edge balance", f"{summary['edge_balance']:.2f}",
                     help="Largest worker's aggregated edges over the mean.")
degree.metric("Nodes", f"{described['nodes']:,}", delta=f"{described['edges']:,} edges", delta_color="off",
              delta_arrow="off", help=f"{plain(described['name'])}; largest in-degree {described['max_in_degree']:,}.")
st.dataframe(halo_table(partition, model), hide_index=True, width="stretch")

modes = simulated_modes(choice.graph, choice.workers, choice.partitioner, model)
st.subheader("Memory per worker")
columns = st.columns(len(modes))
vanilla_peak = max(w.peak for w in modes["vanilla"][1])
for column, (label, (chunk, simulated)) in zip(columns, modes.items()):
    peak = max(w.peak for w in simulated)
    column.metric(f"Budget per worker: {label}", format_bytes(peak),
                  delta=None if label == "vanilla" else f"{peak / vanilla_peak:.2f} of vanilla's", delta_color="off",
                  delta_arrow="off",
                  help=f"{MODE_WORDS[label]}{f', {chunk:,} edges at a time' if chunk else ''}: the largest "
                       f"worker's step peak, above the features, graph and weights it holds.")
worker = st.selectbox("Worker", range(choice.workers), format_func=lambda w: f"worker {w}",
                      index=max(range(choice.workers), key=lambda w: modes["sar"][1][w].peak))
st.plotly_chart(timelines_figure(choice.graph, choice.workers, choice.partitioner, model, worker),
                key="distributed_timelines")
st.caption("Each op of the worker's step, left to right: the memory it holds after it (the dotted line is the peak, "
           "the budget that mode needs). Triangles mark rows received from another worker: fetched in the forward "
           "pass, fetched again in the backward (SAR's attention), or gradients sent home.")

key = (choice, )
job = find_run(key)
measured = None
if job is not None and job.done:
    measured = tuple((label, tuple(v["peaks"])) for label, v in run_summary(job).items())
st.plotly_chart(peaks_figure(choice.graph, choice.workers, choice.partitioner, model, measured),
                key="distributed_peaks")

st.subheader("Run the real workers")
st.caption(f"Starts {choice.workers} processes on this machine joined by torch.distributed (gloo over 127.0.0.1), "
           f"one step per mode after a warm-up, each worker measured by the one meter, and the summed gradients "
           f"compared with one process on the whole graph.")


@safety.callback
def _start() -> None:
    start_run(key, graph, partition, model, {label: ("vanilla" if label == "vanilla" else "sar", chunk)
                                             for label, (chunk, _) in modes.items()})


st.button("Run the workers", icon=":material/play_circle:", type="primary", on_click=_start,
          disabled=job is not None and not job.final)


@safety.fragment(run_every=POLL_SECONDS)
def _progress() -> None:
    running = find_run(key)
    if running is None or running.final:
        st.rerun()
    st.progress(min(running.progress.done / running.progress.total, 0.99),
                text=f"{plain(running.progress.current or 'queued')} · {running.elapsed():.0f} s")
    if st.button("Cancel", icon=":material/stop_circle:", key="distributed_cancel"):
        cancel_run(running)


if job is not None and not job.final:
    _progress()
elif job is not None and not job.done:
    st.warning(f"The run {plain(job.describe_end())}", icon=":material/cancel:")
elif job is not None:
    rows = []
    for label, figures in run_summary(job).items():
        simulated = modes[label][1]
        for w, peak in enumerate(figures["peaks"]):
            rows.append({"mode": label, "worker": w, "simulated peak": format_bytes(simulated[w].peak),
                         "measured peak": format_bytes(peak), "measured / simulated": f"{peak / simulated[w].peak:.3f}",
                         "received": format_bytes(figures["received"][w]),
                         "gradients": "equal" if figures["gradients_match"] else "DIFFER"})
    st.dataframe(rows, hide_index=True, width="stretch")
    worst = max(v["gradient_error"] for v in run_summary(job).values())
    st.caption(f"Gradients against one process on the whole graph, both steps run again in float64: relative "
               f"difference at most {worst:.1e} (equal within 1e-5). Run took {job.elapsed():.0f} s.")
