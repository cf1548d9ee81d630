"""Learn: rematerialization on a small example, step by step."""

import streamlit as st

from explorer import state
from explorer.figures.decompositions import decomposition
from explorer.figures.graph import lesson_dag
from explorer.frame import require_entry
from explorer.jobs.results import options_key
from explorer.jobs.waiting import awaited_outcome
from explorer.learn import EXAMPLE_LAYERS, example_graph, learn_solver, recursion_decomposition
from explorer.widgets.solvers import option_widgets
from explorer.widgets.text import percent, plain
from remat_core import list_solvers, memory_lower_bound
from remat_core.analysis import describe_reason, step_title, walkthrough_steps
from remat_core.graph import format_bytes
from remat_core.schedule import checkpoint_all_peak, describe_op, occurrences
from remat_core.viz import memory_timeline_figure, path_strip_figure, tree_of_bags_figure

require_entry()

STEP_KEY = "w_learn_step"
REASONS_SHOWN = 6

st.title("Learn")
st.caption("Rematerialization, from first principles, on a graph small enough to follow every op.")

graph = example_graph()
peak, lower = checkpoint_all_peak(graph), memory_lower_bound(graph)
labels = {n.id: n.display_name for n in graph.nodes}

st.subheader("1 · Why memory runs out")
st.markdown(
    f"Training computes a forward pass, a loss, then a backward pass that reads the forward activations in reverse. "
    f"Here is the training graph of a {EXAMPLE_LAYERS}-layer chain: the forward layers (blue) feed the loss (red), and "
    f"each gradient *grad i* (green) needs the activation that entered layer *i* (the arcs). Keeping every "
    f"activation until its gradient is computed — *checkpoint-all* — peaks at **{format_bytes(peak)}**.")
st.iframe(lesson_dag(graph.content_hash, graph, resident=(), current=()), height=300,
          alt="the example training graph")

st.subheader("2 · Trade compute for memory")
st.markdown(
    f"*Rematerialization* frees some activations early and recomputes them when the backward pass needs them. The "
    f"least memory any schedule can use here is **{format_bytes(lower)}** (a node, its inputs and the parameters "
    f"must be resident together). Pick a budget between the two and a solver to meet it.")
names = [s.name for s in list_solvers()]
solver_column, budget_column = st.columns([1, 2])
with solver_column:
    chosen = st.selectbox("Solver", names, index=names.index(learn_solver(names)), key="w_learn_solver")
    with st.popover("Options", icon=":material/settings:"):
        option_widgets(chosen)
with budget_column:
    unit = 2**20
    budget_mib = st.slider("Budget (MiB)", min_value=lower / unit, max_value=peak / unit,
                           value=(lower + (peak - lower) * 0.35) / unit, step=0.25, key="w_learn_budget")
budget = int(budget_mib * unit)
options = options_key(state.options_of(chosen))
outcome = awaited_outcome(graph, chosen, budget, options, state.time_limit())
if outcome is not None and outcome.schedule is None and outcome.smallest_feasible is not None:
    st.warning(f"{plain(chosen)} finds no schedule within {format_bytes(budget)} ({plain(outcome.infeasible)}); "
               f"the lesson continues at the smallest budget it can meet, {format_bytes(outcome.smallest_feasible)}.")
    budget = outcome.smallest_feasible
    outcome = awaited_outcome(graph, chosen, budget, options, state.time_limit())
if outcome is None:
    st.stop()
if outcome.schedule is None:
    st.warning(f"{plain(chosen)} finds no schedule for this example: {plain(outcome.infeasible or outcome.error)}. "
               f"Pick another solver or a larger budget.")
    st.stop()
schedule = outcome.schedule
stats = schedule.stats
st.markdown(f"**{plain(chosen)}** fits {format_bytes(budget)} with a peak of **{format_bytes(stats['peak'])}**, "
            f"recomputing {stats['recomputed_nodes']} tensors for **{percent(stats['overhead'])}** more compute.")

st.subheader("3 · Tree and path decompositions")
recursion = recursion_decomposition(chosen, state.options_of(chosen))
st.markdown(
    "Forget the edges' directions and the always-resident inputs: a **tree decomposition** covers the graph with "
    "small *bags* of tensors, joined in a tree, so that every edge lies inside some bag and the bags holding one "
    "tensor are connected. A **path decomposition** is one whose tree is a path. The *width* (largest bag minus "
    "one) stays small for training graphs however deep the network: forward and backward interleave like the "
    "rungs of a ladder. Any bag *separates* the graph: the recursion keeps a separator bag's tensors, solves "
    "each side, and recurses, so memory grows with width x recursion depth, not with the number of layers.")
built = {kind: decomposition(graph.content_hash, graph, kind, method)
         for kind, method in (("tree", recursion.get("tree", "min_degree")), ("path", recursion.get("path", "best")))}
tree, tree_separators = built["tree"]
path, _ = built["path"]
left, right = st.columns(2)
with left:
    st.markdown(f"**Tree decomposition**: width {tree.width}, {len(tree.bags)} bags")
    st.plotly_chart(tree_of_bags_figure(tree.bags, tree.edges, labels=labels, height=300, horizontal=True),
                    key="learn_tree")
with right:
    st.markdown(f"**Path decomposition**: width {path.width}, {len(path.bags)} bags")
    st.plotly_chart(path_strip_figure(path.bags, labels=labels, height=300), key="learn_path")

st.subheader("4 · Step through the schedule")
steps = walkthrough_steps(schedule)
st.markdown("Each step is one call of the solver's recursion when the solver records its calls (the separator "
            "frame it works in), else one computation, with the frees that follow. Resident tensors are outlined, "
            "the ones just computed are orange, and the memory timeline grows as you step.")
st.session_state.setdefault(STEP_KEY, 1)
st.session_state[STEP_KEY] = min(st.session_state[STEP_KEY], len(steps))
back, forward, position = st.columns([1, 1, 6])
if back.button("◀ Previous", key="learn_back", disabled=st.session_state[STEP_KEY] <= 1):
    st.session_state[STEP_KEY] -= 1
if forward.button("Next ▶", key="learn_next", disabled=st.session_state[STEP_KEY] >= len(steps)):
    st.session_state[STEP_KEY] += 1
with position:
    number = st.slider("Step", 1, len(steps), key=STEP_KEY, label_visibility="collapsed") if len(steps) > 1 else 1
step = steps[number - 1]
result = schedule.simulation
resident = result.resident_after(graph, step.last_op)
with st.container(border=True):
    where = []
    if step.depth is not None:
        where.append(f"recursion depth {step.depth}")
    if step.frame is not None:
        where.append(f"separator frame {plain(step.frame)}")
    ops_range = f"op {step.first_op}" if step.first_op == step.last_op else f"ops {step.first_op}–{step.last_op}"
    st.markdown(f"**Step {number} of {len(steps)}: {plain(step_title(graph, step))}** ({ops_range} on the timeline)"
                + (f" · {', '.join(where)}" if where else ""))
    explained = [i for i in range(step.first_op, step.last_op + 1) if schedule.reason_at(i)]
    occurrence = occurrences(result)
    for i in explained[:REASONS_SHOWN]:
        st.caption(f"· **{plain(describe_op(graph, result, i, occurrence[i]))}**: "
                   f"{plain(describe_reason(schedule.reason_at(i)))}")
    if len(explained) > REASONS_SHOWN:
        st.caption(f"· … and {len(explained) - REASONS_SHOWN} more ops")
    st.markdown(f"Resident afterwards: **{format_bytes(step.memory)}** of {format_bytes(budget)} "
                f"({len(resident)} tensors).")
st.iframe(lesson_dag(graph.content_hash, graph, resident=tuple(resident), current=tuple(n for n, _ in step.computed)),
          height=300, alt="the example graph at this step")
frame_kind = recursion.get("frame_of")
if frame_kind in built and isinstance(step.frame, int):
    decomposition_, separators = built[frame_kind]
    edges = [(parent, child) for child, parent in enumerate(separators.parent) if parent >= 0]
    timeline_column, tree_column = st.columns([3, 2])
    with tree_column:
        st.markdown(f"**The separator tree** ({frame_kind} decomposition): the frame of this step is outlined")
        st.plotly_chart(tree_of_bags_figure(decomposition_.bags, edges, root=separators.root, labels=labels,
                                            selected=step.frame, height=320), key="learn_separators")
else:
    timeline_column = st.container()
with timeline_column:
    st.plotly_chart(memory_timeline_figure(graph, schedule, budget, upto=step.last_op, animate=False, height=340),
                    key="learn_timeline")
