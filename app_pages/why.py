"""Why recomputed? Each computation of a tensor with its reason, the budget from which it is computed
once, two budgets side by side, and another solver (a deployed policy first) at the same budget."""


import streamlit as st

from explorer import state
from explorer.figures.schedule import neighbourhood_page
from explorer import safety
from explorer.jobs.results import once_threshold_job, options_key
from explorer.jobs.waiting import POLL_SECONDS, awaited_outcome
from explorer.safety import callback
from explorer.state.budgets import scale_of
from explorer.widgets.budget import other_budget_slider
from explorer.widgets.exports import csv_download, diff_records
from explorer.widgets.jobs import job_panel
from explorer.widgets.metrics import outcome_message
from explorer.widgets.rows import figure_metric, wrapping_row
from explorer.widgets.solvers import deployed_peers, offered_solvers
from explorer.widgets.text import percent, plain
from explorer.widgets.why_link import why_url
from remat_core import get_solver
from remat_core.analysis import (CHANGE_ORDER, OnceThreshold, describe_computation, explain_tensor, graph_summary,
                                 offload_story, recomputed_tensors, schedule_diff)
from remat_core.analysis.explain import named_fields
from remat_core.graph import format_bytes, node_by_label, node_labels
from remat_core.schedule import Schedule, ordinal


PICKER = "w_why_tensor"
RIVAL_KEY = "w_why_rival"


@callback
def tensor_picked() -> None:
    """The tensor picked becomes the page's tensor (what a link to it names)."""
    st.session_state[state.WHY_TENSOR] = st.session_state[PICKER]


st.title("Why recomputed?")
graph = state.graph()
summary = graph_summary(graph)
scale = scale_of(graph)  # the budget slider's: the threshold button and budget B take its steps
solver, budget = state.solver(), state.budget()
options = options_key(state.solve_options(solver))
limit = state.time_limit()
outcome = awaited_outcome(graph, solver, budget, options, limit)
if outcome is None:
    st.stop()
if outcome.schedule is None:
    outcome_message(outcome, solver, budget)
    st.stop()
schedule = outcome.schedule
counts = schedule.simulation.compute_counts
recomputed = recomputed_tensors(graph, schedule)
st.caption(f"**{plain(solver)}** at **{format_bytes(budget)}** recomputes {len(recomputed)} of {len(counts)} "
           f"tensors. Pick one to see each of its computations and why.")

labels = node_labels(graph)
offloaded = {n for a, n in schedule.ops if a == "offload"}
ranked = [n for n, _ in recomputed] + [n for n in graph.topological_order() if counts.get(n) == 1 and n in offloaded] \
    + [n for n in graph.topological_order() if counts.get(n) == 1 and n not in offloaded]
asked = st.session_state.get(state.WHY_TENSOR)
wanted = node_by_label(graph, str(asked)) if asked is not None else None  # a link may name it by label or id
if asked is not None and wanted not in ranked:
    st.warning(f"No computed tensor of this model is named {plain(asked)}; showing the most recomputed one. Pick "
               f"another below.")
if wanted in ranked:
    st.session_state[PICKER] = wanted  # named elsewhere: a link, the Timeline's Explain
elif st.session_state.get(PICKER) not in ranked:
    st.session_state[PICKER] = ranked[0]
tensor = st.selectbox("Tensor", ranked, key=PICKER, on_change=tensor_picked,
                      format_func=lambda n: f"{labels[n]} · computed {counts[n]}×"
                                            + (" · offloaded" if n in offloaded else ""))
st.session_state[state.WHY_TENSOR] = tensor
explanation = explain_tensor(graph, schedule, tensor)
node = explanation.node
st.caption(f"Link to this explanation: [{plain(labels[tensor])}]({why_url(state.model(), solver, budget, tensor)})",
           help=f"Opens this page on this tensor, solver and budget. Its id in the graph file: {tensor}")

figures = wrapping_row(gap="large")
figure_metric(figures, "Computed", f"{explanation.times_computed}×")
figure_metric(figures, "Size", format_bytes(node.mem))
figure_metric(figures, "Kind", node.kind)
figure_metric(figures, "Readers", len(explanation.readers))

story = offload_story(graph, schedule, tensor) if tensor in offloaded else None
if story is not None:
    st.info(plain(story.sentence(graph)), icon=":material/swap_vert:")

with st.expander("Around it: its producers, its readers and what is recomputed with it", expanded=True):
    html, drawn, left_out = neighbourhood_page(graph.content_hash, graph, solver, budget, options, limit, tensor)
    st.iframe(html, height=460)
    st.caption("★ this tensor · :blue[●] it is computed from these · :green[●] these read it · :orange[●] recomputed "
               "with it. A black ring: computed more than once. Drag a node to pull the knot apart; hover for "
               "its size and how often it is computed. Two hops each way, parameters left out"
               + (f"; {left_out} more nodes left out to keep it readable." if left_out else "."))

for computation in explanation.computations:
    with st.container(border=True):
        title = f"{ordinal(computation.occurrence)} computation · step {computation.step}"
        st.markdown(f"**{title}**" + (" · recomputation" if computation.is_recomputation else ""))
        st.markdown(plain(describe_computation(graph, computation, budget)))
        if computation.freed_reason or computation.reason:
            with st.expander("Recorded reasons"):
                st.json({"compute": computation.reason and named_fields(computation.reason, graph),
                         "previous free": computation.freed_reason and named_fields(computation.freed_reason, graph)})


def threshold_message(threshold: OnceThreshold) -> None:
    """Where the solver stops recomputing the tensor, with a button to move the budget there."""
    if threshold.budget is None:
        st.warning(f"{plain(solver)} recomputes it even at {format_bytes(threshold.below)}, the largest budget "
                   f"checked.")
    elif not threshold.recomputed_below:
        st.success(f"{plain(solver)} computes it once at every feasible budget checked (from "
                   f"{format_bytes(threshold.budget)}).")
    else:
        st.success(f"From **{format_bytes(threshold.budget)}** {plain(solver)} computes it once "
                   f"({threshold.checked} budgets checked; at {format_bytes(threshold.below)} it is still "
                   f"recomputed or infeasible).")
        target = scale.snap(threshold.budget)  # the slider's step at or above it: what the budget becomes
        if target != budget:
            st.button(f"Set the budget to {scale.label(target)}", key="why_use_threshold", on_click=use_budget,
                      args=(target,))


@callback
def use_budget(bytes_: int) -> None:
    state.set_budget(bytes_)


@callback
def find_threshold() -> None:
    once_threshold_job(graph, solver, tensor, options, limit)


@safety.fragment(run_every=POLL_SECONDS)
def rerun_when_found() -> None:
    """The search's progress, looked at every second; the page reruns once it has an answer."""
    job = once_threshold_job(graph, solver, tensor, options, limit, start=False)
    if job is None or job.final:
        st.rerun()
    job_panel(job, key="why_once", rerun=None)
    st.caption("It runs in the background: the rest of this page and the other pages work meanwhile.")


st.subheader("From which budget is it computed once?")
search = once_threshold_job(graph, solver, tensor, options, limit, start=not get_solver(solver).searching)
if search is None:
    st.button("Find it (solves a few more budgets in the background)", key="why_find_once", on_click=find_threshold,
              help=f"{plain(solver)} searches up to its time limit ({limit:g} s) at each budget; budgets already "
                   f"solved (its sweep, the results store) are not solved again.")
elif search.done:
    threshold_message(search.result)
elif search.final:
    job_panel(search, key="why_once")
else:
    rerun_when_found()

def differences(schedule_b: Schedule, solver_b: str, budget_b: int, side_b: str, csv_name: str, csv_key: str) -> None:
    """The tensors the session's schedule (A) and ``schedule_b`` compute a different number of times, each with links
    to why at A and at B, and the table as CSV."""
    changes = schedule_diff(graph, schedule, schedule_b)
    if not changes:
        st.info("Both compute every tensor the same number of times.")
        return
    tally = {c: sum(1 for x in changes if x.change == c) for c in CHANGE_ORDER}
    st.caption(" · ".join(f"{n} {c}" for c, n in tally.items() if n))
    model = state.model()
    st.dataframe([{"tensor": labels[c.tensor], "change": c.change, "computed at A": c.computes_a,
                   f"computed at B ({side_b})": c.computes_b, "bytes": format_bytes(c.mem),
                   "why at A": why_url(model, solver, budget, c.tensor),
                   "why at B": why_url(model, solver_b, budget_b, c.tensor)} for c in changes],
                 hide_index=True, width="stretch",
                 column_config={"why at A": st.column_config.LinkColumn(display_text="why at A"),
                                "why at B": st.column_config.LinkColumn(display_text="why at B")})
    csv_download("Comparison CSV", diff_records(graph, changes, budget, budget_b), csv_name, csv_key,
                 "The table above, with raw numbers: each tensor computed a different number of times.")


def side_metrics(pairs: tuple[tuple[str, Schedule], ...]) -> None:
    """Each labelled schedule's overhead, recomputed tensors and peak, side by side."""
    for side, (label, sched) in zip(st.columns(len(pairs)), pairs):
        side.metric(label, percent(sched.stats["overhead"]), delta=f"{sched.stats['recomputed_nodes']} tensors "
                    f"recomputed · peak {format_bytes(sched.stats['peak'])}", delta_color="off", delta_arrow="off")


st.subheader("Two budgets side by side")
other_key = "w_why_other_budget"
other = other_budget_slider(scale, other_key, "Budget B (A is the current budget)",
                            default=budget + max(summary.checkpoint_all_peak - budget, 0) // 2)
other_outcome = awaited_outcome(graph, solver, other, options, limit)
if other_outcome is not None and other_outcome.schedule is None:
    outcome_message(other_outcome, solver, other)
elif other_outcome is not None:
    side_metrics(((f"A: {format_bytes(budget)}", schedule), (f"B: {format_bytes(other)}", other_outcome.schedule)))
    differences(other_outcome.schedule, solver, other, format_bytes(other),
                f"{graph.name}-{solver}-{budget}-vs-{other}.csv", "why_diff_csv")


st.subheader("Another solver at this budget")
rivals = [name for name in [*deployed_peers(graph), *offered_solvers(graph)] if name != solver]
rivals = list(dict.fromkeys(rivals))  # the deployed policies first: "why does Hugging Face recompute it?"
if st.session_state.get(RIVAL_KEY) not in rivals:
    st.session_state[RIVAL_KEY] = rivals[0]
rival = st.selectbox("Solver B (A is the session's solver)", rivals, key=RIVAL_KEY,
                     help="The deployed policies (Hugging Face's checkpointing, torchtitan's, PyTorch's auto-SAC, "
                          "the partitioner) come first. A fixed policy holds what it holds: below its peak it is "
                          "refused, and a button moves the budget there.")
rival_options = options_key(state.solve_options(rival))
rival_outcome = awaited_outcome(graph, rival, budget, rival_options, limit)
if rival_outcome is not None and rival_outcome.schedule is None:
    outcome_message(rival_outcome, rival, budget, button_key="why_rival_smallest")
elif rival_outcome is not None:
    rival_schedule = rival_outcome.schedule
    side_metrics(((f"A: {solver}", schedule), (f"B: {rival}", rival_schedule)))
    rival_counts = rival_schedule.simulation.compute_counts
    ours, theirs = counts.get(tensor, 0), rival_counts.get(tensor, 0)
    said = f"**{plain(solver)}** computes {plain(labels[tensor])} {ours}×, **{plain(rival)}** {theirs}×."
    if theirs > 1:
        again = [c for c in explain_tensor(graph, rival_schedule, tensor).computations if c.is_recomputation]
        said += f" {plain(rival)}'s reason: {plain(describe_computation(graph, again[0], budget))}"
    elif ours > 1:
        said += f" {plain(rival)} keeps it (or its memory allows what {plain(solver)}'s budget does not)."
    st.markdown(said)
    differences(rival_schedule, rival, budget, rival, f"{graph.name}-{solver}-vs-{rival}-{budget}.csv",
                "why_rival_csv")
