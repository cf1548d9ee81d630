"""Learn: the treewidth and pathwidth recursions of Kumar et al., call by call, on a small example or one
module of the loaded model, beside Chen's sqrt(n) and the exact solver on the same graph."""

import streamlit as st

from explorer import state
from explorer.state import learn
from explorer.figures.decompositions import decomposition
from explorer.figures.lesson import GRAPH_HEIGHT, TIMELINE_HEIGHT, TREE_HEIGHT, step_figures, walk_figures
from explorer.jobs.results import awaited_solve
from explorer.safety import fragment
from explorer.widgets.stepper import step_controls
from explorer.widgets.text import number, percent, plain
from explorer.widgets.why_link import why_url
from remat_core import RematError, memory_lower_bound
from remat_core.analysis import (call_title, describe_call, describe_reason, module_groups, walk_step_title)
from remat_core.graph import format_bytes, node_labels
from remat_core.schedule import checkpoint_all_peak, describe_op
from remat_core.solvers import recursion_decomposition
from remat_core.viz import LEGEND, compute_counts_figure, memory_curves_figure, path_strip_figure, tree_of_bags_figure


OPS_LISTED = 6
PAPER_NAMES = {"treewidth": "TW-Remat", "pathwidth": "PW-Remat"}
"""What the paper calls each recursion (a solver without one is shown by its name)."""
COMPARED = ("chen-sqrt", "checkmate-milp")  # solved on the lesson graph at the recursion's memory, to compare

st.title("Learn")
st.caption("How the recursions of Kumar et al., *Efficient Rematerialization for Deep Networks* (NeurIPS 2019), "
           "trade compute for memory, one call at a time.")

unread = learn.open_lesson()
if unread:
    st.warning(f"This link's lesson settings were not understood: {plain('; '.join(unread))}. The page opened on its "
               f"defaults for those.")

# -- 1 · the example ---------------------------------------------------------------------------------
st.subheader("1 · The graph")
choices = [*learn.EXAMPLES, learn.MODULE_EXAMPLE]
kind = st.segmented_control("Example", choices, required=True, key="w_learn_example",
                            format_func=lambda k: learn.EXAMPLES[k].title if k in learn.EXAMPLES
                            else "A module of your model")
model_graph = state.graph()
if kind == learn.MODULE_EXAMPLE:
    modules = module_groups(model_graph, max_depth=3)
    if not modules:
        st.info("The loaded model's nodes carry no module paths; pick a built-in example, or trace a model on the "
                "Model page.")
        st.stop()
    module = st.selectbox("Module", modules, key="w_learn_module",
                          index=next((i for i, m in enumerate(modules) if m.count(".") == 1), 0),
                          help="Its forward and backward nodes; what it reads from the rest of the model is "
                               "resident (pinned) throughout.")
    try:
        graph = learn.module_graph(model_graph.content_hash, model_graph, module)
    except RematError as e:
        st.warning(plain(e))
        st.stop()
    about = f"module **{plain(module)}** of {plain(model_graph.name)}, forward and backward"
else:
    example = learn.EXAMPLES[kind]
    size = st.number_input(f"Size ({example.size_name})", min_value=example.low, max_value=example.high,
                           key=learn.size_key(kind))
    graph = learn.example_graph(kind, int(size))
    about = example.about
problem = learn.too_big(graph)
if problem:
    st.warning(f"This graph is too big to step through: {plain(problem)}.")
    st.stop()
labels = node_labels(graph)
peak, lower = checkpoint_all_peak(graph), memory_lower_bound(graph)
computed = sum(1 for n in graph.nodes if not n.pinned)
st.markdown(f"The graph: {about}. It computes **{computed}** tensors. Keeping every activation until the backward "
            f"pass reads it (*checkpoint-all*) peaks at **{format_bytes(peak)}**; no schedule can use less than "
            f"**{format_bytes(lower)}** (one tensor with its inputs and the pinned tensors). In between, a schedule "
            f"frees tensors early and computes them again when they are needed: *rematerialization*.")

# -- 2 · decompositions -------------------------------------------------------------------------------
st.subheader("2 · Tree and path decompositions")
st.markdown(
    "Forget the edges' directions and the pinned tensors: a **tree decomposition** covers the graph with small "
    "*bags* of tensors joined in a tree, so that every edge lies inside some bag and the bags holding one tensor "
    "are connected; a **path decomposition** is one whose tree is a path. The *width* (largest bag minus one) stays "
    "small for training graphs however deep the network. Any bag *separates* what lies on its sides: the "
    "recursion keeps a separator bag's tensors resident, solves each side, and recurses, so memory grows with "
    "width × depth of the recursion, not with the number of layers.")
built = {}
try:
    built = {k: decomposition(graph.content_hash, graph, k, m) for k, m in (("tree", "min_degree"), ("path", "best"))}
except RematError as e:
    st.warning(f"No decomposition of this graph: {plain(e)}")
    st.stop()
left, right = st.columns(2)
with left:
    tree, _ = built["tree"]
    st.markdown(f"**Tree decomposition**: width {tree.width}, {len(tree.bags)} bags")
    st.plotly_chart(tree_of_bags_figure(tree.bags, tree.edges, labels=labels, height=280, horizontal=True),
                    key="learn_tree", config={"displayModeBar": False})
with right:
    path, _ = built["path"]
    st.markdown(f"**Path decomposition**: width {path.width}, {len(path.bags)} bags")
    st.plotly_chart(path_strip_figure(path.bags, labels=labels, height=280), key="learn_path",
                    config={"displayModeBar": False})

# -- 3 · the recursion -------------------------------------------------------------------------------
st.subheader("3 · The recursion, call by call")
st.markdown(
    "`remat(X, keep, touch)` makes `keep` resident and computes the outputs `touch`. Its *subgraph* S is every "
    "tensor not resident that this needs. In separator bag X it computes the bag's tensors of S in order, keeping "
    "them; before each, it calls itself on each child piece to bring in that tensor's inputs, and frees them "
    "after. Then it hands the rest of its request to the children. A tensor freed by one call and needed by a "
    "later one is computed again: that is the recomputation the recursion pays for its memory.")
controls = st.columns(2)
solver = controls[0].segmented_control("Recursion", learn.RECURSIONS, required=True, key="w_learn_recursion",
                                       format_func=lambda r: f"{PAPER_NAMES.get(r, r)} ({recursion_decomposition(r)})",
                                       help="TW-Remat recurses over a tree decomposition, PW-Remat over a path "
                                            "decomposition")
mode = controls[1].segmented_control("Memory", learn.MEMORY_MODES, required=True, key="w_learn_mode",
                                     format_func={"pure": "As in the paper", "budget": "Fit a budget"}.get,
                                     help="As in the paper: every call recurses down to the leaves. Fit a budget: "
                                          "a call whose subgraph fits the memory left computes it without "
                                          "recursing.")
budget = None
if mode == "budget" and peak <= lower:
    st.caption(f"Checkpoint-all already needs only the least memory any schedule needs ({format_bytes(peak)}): the "
               f"budget is that.")
    budget = peak
elif mode == "budget":
    unit = 2**20 if peak >= 2**22 else 2**10
    shown = st.slider(f"Budget ({'MiB' if unit == 2**20 else 'KiB'})", lower / unit, peak / unit,
                      (lower + (peak - lower) * 0.5) / unit, key="w_learn_budget",
                      help="A call whose subgraph fits the memory left computes it in order without recursing.")
    budget = int(shown * unit)
try:
    walk = learn.lesson_walk(graph.content_hash, graph, solver, budget)
except RematError as e:
    st.warning(f"The recursion is too long to step through here: {plain(e)}. Pick a smaller graph.")
    st.stop()
stats = walk.schedule.stats
trace = walk.trace
peak_step = next((i for i, s in enumerate(walk.steps) if s.peak >= stats["peak"]), len(walk.steps) - 1)
st.markdown(f"**{len(walk.calls)} calls** over a {trace.decomposition.kind} decomposition of width "
            f"{trace.decomposition.width} (separator tree of height {trace.separators.height}), "
            f"**{len(walk.steps)} steps**. Peak **{format_bytes(stats['peak'])}**, reached at **step {peak_step + 1}** "
            f"(checkpoint-all: {format_bytes(peak)}), cost {percent(stats['overhead'])} over computing each tensor "
            f"once, {stats['recomputed_nodes']} tensors recomputed."
            + (f" The budget was {format_bytes(budget)}: the recursion alone "
               f"{'fits it' if stats['peak'] <= budget else 'goes over it (the solver then evicts or falls back)'}."
               if budget is not None else ""))
if stats["peak"] > peak:
    st.warning(f"Here the recursion peaks **above** checkpoint-all ({format_bytes(stats['peak'])} against "
               f"{format_bytes(peak)}): on a graph this small (or this wide) the separator bags it keeps resident "
               f"cost more than the activations it frees. Its bound, O((width + in-degree) × log n) tensors, pays "
               f"off on long graphs of small width; a budget-aware solver would fall back to a cheaper schedule "
               f"here.", icon=":material/trending_up:")
walk_key = (graph.content_hash, solver, budget)
learn.start_walk(walk_key, len(walk.steps))


def walkthrough() -> None:
    """The step controls, the call at that step in words, and the three linked figures."""
    at = step_controls(len(walk.steps), peak_step)
    learn.publish_lesson(kind, None if kind == learn.MODULE_EXAMPLE else int(size), solver, mode, at)
    step = walk.steps[at]
    call = walk.calls[step.call]
    result = walk.schedule.simulation
    figures = walk_figures(walk_key, graph, walk, budget)
    picked = st.session_state.get(learn.PICKED_TENSOR)
    drawn, tree_at, timeline = step_figures(figures, graph, walk, step, picked)
    generation = st.session_state.setdefault(learn.CHART_GENERATION, 0)
    shown = f"at step {at + 1} of {len(walk.steps)}"  # the charts' accessible names: a reader can tell the step
    graph_column, text_column = st.columns([3, 2])
    with graph_column:
        on_graph = st.echarts_chart(drawn, key=f"learn_graph_{generation}", on_select="rerun", height=GRAPH_HEIGHT,
                                    theme=None, alt=f"The graph {shown}")
    with text_column, st.container(height=GRAPH_HEIGHT, border=True):
        st.markdown(f"**{plain(walk_step_title(graph, walk, step))}**")
        st.caption(f"{plain(call_title(graph, walk, call.index))} · memory now **{format_bytes(step.memory)}** · "
                   f"peak so far {format_bytes(step.peak)} of {format_bytes(stats['peak'])} · cost so far "
                   f"{number(step.cost)} of {number(stats['cost'])}")
        for line in describe_call(graph, walk, call.index):
            st.markdown(plain(line))
        if step.ops:
            with st.expander(f"This step's {len(step.ops)} op{'s' if len(step.ops) > 1 else ''}"):
                for i in list(step.ops)[:OPS_LISTED]:
                    st.caption(f"· {plain(describe_op(graph, result, i, walk.occurrence[i]))}: "
                               f"{plain(describe_reason(walk.schedule.reason_at(i), graph=graph))}")
                if len(step.ops) > OPS_LISTED:
                    st.caption(f"· … and {len(step.ops) - OPS_LISTED} more ops")
    tree_column, timeline_column = st.columns([2, 3])
    with tree_column:
        on_tree = st.echarts_chart(tree_at, key=f"learn_separators_{generation}", on_select="rerun",
                                   height=TREE_HEIGHT, theme=None, alt=f"The separator tree {shown}")
    with timeline_column:
        on_timeline = st.echarts_chart(timeline, key=f"learn_timeline_{generation}", on_select="rerun",
                                       height=TIMELINE_HEIGHT, theme=None, alt=f"The memory timeline {shown}")
    link = learn.lesson_url(kind, None if kind == learn.MODULE_EXAMPLE else int(size), solver, mode, at)
    st.caption(f"[Link to this step]({link}) · The graph: " + ", ".join(f"{what}: {mark}" for what, mark in LEGEND)
               + ". The separator tree: this call's bag in amber, the open calls' bags ringed. Memory: after this "
                 "step, this call's ops shaded. Click a tensor for the calls that compute it, a bag for the first "
                 "call in it, a point of the timeline for the step of that op.")
    if picked is not None:
        tensor_calls(picked)
    if learn.follow_click(walk, figures, on_graph, on_tree, on_timeline):
        st.session_state[learn.CHART_GENERATION] = generation + 1
        st.rerun(scope="fragment")


def tensor_calls(tensor: str) -> None:
    """The calls that compute a clicked tensor, each a button to its step."""
    found = walk.computing_steps.get(tensor, ())
    with st.container(horizontal=True, vertical_alignment="center"):
        st.markdown(f"**{plain(labels[tensor])}**, computed {len(found)}×" + (" by:" if found else
                                                                            " (pinned or never needed)"),
                    help=f"Its id in the graph file: {tensor}")
        for k, index in enumerate(found):
            st.button(f"call {walk.steps[index].call} (step {index + 1})", key=f"learn_goto_{k}",
                      on_click=learn.go_to, args=(index, len(walk.steps)))
        if kind == learn.MODULE_EXAMPLE:
            st.link_button("Why in your schedule?", why_url(state.model(), state.solver(), state.budget(), tensor,
                                                            model_graph),
                           help="The Why page on this tensor of the whole model, under the session's solver and "
                                "budget")


fragment(walkthrough, run_every=learn.timer())()

# -- 4 · compare ----------------------------------------------------------------------------------------
st.subheader("4 · The same graph, other schedules")
compare_at = max(budget or 0, stats["peak"], lower)
st.markdown(f"At the recursion's memory, **{format_bytes(compare_at)}**: Chen et al.'s √n checkpointing "
            f"(`chen-sqrt`) and Checkmate's exact MILP (`checkmate-milp`, optimal for the graph's topological "
            f"order within its time limit).")


def comparison() -> None:
    """The recursion beside the other solvers at the same budget: memory over steps and computations per tensor."""
    outcomes = {name: awaited_solve(graph, compare_at, name, (), state.time_limit(), wait=0) for name in COMPARED}
    schedules = {PAPER_NAMES.get(solver, solver): walk.schedule}
    rows = [{"schedule": PAPER_NAMES.get(solver, solver), "peak": format_bytes(stats["peak"]),
             "cost overhead": percent(stats["overhead"]), "tensors recomputed": stats["recomputed_nodes"],
             "most computations of one tensor": max(walk.schedule.simulation.compute_counts.values())}]
    for name, outcome in outcomes.items():
        if outcome is None:
            rows.append({"schedule": name, "peak": "solving…"})
        elif outcome.schedule is None:
            rows.append({"schedule": name, "peak": "no schedule: " + outcome.detail})
        else:
            s = outcome.schedule
            schedules[name] = s
            rows.append({"schedule": name, "peak": format_bytes(s.stats["peak"]),
                         "cost overhead": percent(s.stats["overhead"]), "tensors recomputed": s.stats["recomputed_nodes"],
                         "most computations of one tensor": max(s.simulation.compute_counts.values())})
    st.dataframe(rows, hide_index=True, width="stretch")
    left, right = st.columns(2)
    with left:
        st.plotly_chart(memory_curves_figure(schedules, compare_at), key="learn_compare_memory",
                        config={"displayModeBar": False})
    with right:
        if any(c > 1 for s in schedules.values() for c in s.simulation.compute_counts.values()):
            st.plotly_chart(compute_counts_figure(graph, schedules), key="learn_compare_counts",
                            config={"displayModeBar": False})
        else:
            st.caption("No schedule here computes any tensor twice.")
    if any(o is None for o in outcomes.values()):
        st.caption("Solving in the background; this part updates when the solves are done.")
    elif pending:
        st.rerun()  # all solves are in: run the page again so that this part stops polling


pending = any(awaited_solve(graph, compare_at, name, (), state.time_limit(), wait=0) is None for name in COMPARED)
fragment(comparison, run_every=1.0 if pending else None)()
