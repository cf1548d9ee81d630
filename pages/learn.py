"""Learn: rematerialization on a small example, step by step."""

import importlib.util

import streamlit as st

from explorer import state
from explorer.cache import options_key, solve_outcome
from explorer.frame import require_entry
from explorer.learn import EXAMPLE_LAYERS, example_graph, learn_solver, lesson_dag
from explorer.widgets import percent, plain
from remat_core import checkpoint_all_peak, list_solvers, memory_lower_bound
from remat_core.budget import format_bytes
from remat_core.explain import describe_reason
from remat_core.viz import memory_timeline_figure
from remat_core.walkthrough import step_title, walkthrough_steps

require_entry()

STEP_KEY = "w_learn_step"

st.title("Learn")
st.caption("Rematerialization, from first principles, on a graph small enough to follow every op.")

graph = example_graph()
peak, lower = checkpoint_all_peak(graph), memory_lower_bound(graph)

st.subheader("1 · Why memory runs out")
st.markdown(
    f"Training computes a forward pass, a loss, then a backward pass that reads the forward activations in reverse. "
    f"Here is the training graph of a {EXAMPLE_LAYERS}-layer chain: the forward layers (blue) feed the loss (red), and "
    f"each gradient *grad i* (green) needs the activation that entered layer *i* (the arcs). Keeping every "
    f"activation until its gradient is computed — *checkpoint-all* — peaks at **{format_bytes(peak)}**.")
st.iframe(lesson_dag(graph, resident=(), current=()), height=300, alt="the example training graph")

st.subheader("2 · Trade compute for memory")
st.markdown(
    f"*Rematerialization* frees some activations early and recomputes them when the backward pass needs them. The "
    f"least memory any schedule can use here is **{format_bytes(lower)}** (a node, its inputs and the parameters "
    f"must be resident together). Pick a budget between the two and a solver to meet it.")
names = [s.name for s in list_solvers()]
solver_column, budget_column = st.columns([1, 2])
with solver_column:
    chosen = st.selectbox("Solver", names, index=names.index(learn_solver(names)), key="w_learn_solver")
with budget_column:
    unit = 2**20
    budget_mib = st.slider("Budget (MiB)", min_value=lower / unit, max_value=peak / unit,
                           value=(lower + (peak - lower) * 0.35) / unit, step=0.25, key="w_learn_budget")
budget = int(budget_mib * unit)
outcome = solve_outcome(graph.content_hash, graph, chosen, budget, options_key({}), state.time_limit())
if outcome.schedule is None and outcome.smallest_feasible is not None:
    st.warning(f"{plain(chosen)} finds no schedule within {format_bytes(budget)} ({plain(outcome.infeasible)}); "
               f"the lesson continues at the smallest budget it can meet, {format_bytes(outcome.smallest_feasible)}.")
    budget = outcome.smallest_feasible
    outcome = solve_outcome(graph.content_hash, graph, chosen, budget, options_key({}), state.time_limit())
if outcome.schedule is None:
    st.warning(f"{plain(chosen)} finds no schedule for this example: {plain(outcome.infeasible or outcome.error)}. "
               f"Pick another solver or a larger budget.")
    st.stop()
schedule = outcome.schedule
stats = schedule.stats
st.markdown(f"**{plain(chosen)}** fits {format_bytes(budget)} with a peak of **{format_bytes(stats['peak'])}**, "
            f"recomputing {stats['recomputed_nodes']} tensors for **{percent(stats['overhead'])}** more compute.")

st.subheader("3 · Step through the schedule")
steps = walkthrough_steps(schedule)
st.markdown("Each step computes one tensor (or runs one call of the solver's recursion, when the solver records its "
            "calls) and frees what is no longer needed. Resident tensors are outlined; the memory timeline grows "
            "as you step.")
st.session_state.setdefault(STEP_KEY, 1)
st.session_state[STEP_KEY] = min(st.session_state[STEP_KEY], len(steps))
back, forward, position = st.columns([1, 1, 6])
if back.button("◀ Previous", key="learn_back", disabled=st.session_state[STEP_KEY] <= 1):
    st.session_state[STEP_KEY] -= 1
if forward.button("Next ▶", key="learn_next", disabled=st.session_state[STEP_KEY] >= len(steps)):
    st.session_state[STEP_KEY] += 1
with position:
    number = st.slider("Step", 1, len(steps), key=STEP_KEY, label_visibility="collapsed")
step = steps[number - 1]
result = schedule.simulation
resident = result.resident_after(graph, step.last_op)
with st.container(border=True):
    where = []
    if step.depth is not None:
        where.append(f"recursion depth {step.depth}")
    if step.bag is not None:
        where.append(f"bag {plain(step.bag)}")
    st.markdown(f"**Step {number} of {len(steps)}: {plain(step_title(graph, step))}**"
                + (f" · {', '.join(where)}" if where else ""))
    for reason in step.reasons[:6]:
        st.caption("· " + plain(describe_reason(reason)))
    st.markdown(f"Resident afterwards: **{format_bytes(step.memory)}** of {format_bytes(budget)} "
                f"({len(resident)} tensors).")
st.iframe(lesson_dag(graph, resident=tuple(resident), current=tuple(n for n, _ in step.computed)), height=300,
          alt="the example graph at this step")
st.plotly_chart(memory_timeline_figure(graph, schedule, budget, upto=step.last_op, animate=False, height=320),
                key="learn_timeline")

st.subheader("4 · Tree and path decompositions")
if importlib.util.find_spec("remat_core.decompose") is None:
    st.info("The treewidth and pathwidth solvers recurse on a tree (or path) decomposition of the graph: small "
            "bags of tensors that separate it into independent parts, so memory grows with the width of the "
            "decomposition and the depth of the recursion, not with the number of layers. The decompositions "
            "(`remat_core.decompose`) are not part of this build yet; their figures will appear here.",
            icon=":material/construction:")
