"""Timeline: the schedule's memory over steps (animated), what is resident at a step, the memory map under the
caching-allocator model, and the lifetime chart."""


import streamlit as st

from explorer import state
from explorer.figures.schedule import lifetime_figure, memory_figure, memory_map, transfer_figure
from explorer.jobs.results import options_key, solve_key
from explorer.jobs.waiting import awaited_outcome
from explorer.pages import page_path
from explorer.widgets.exports import schedule_download, snapshot_download
from explorer.widgets.lifetime import lifetime_controls
from explorer.widgets.metrics import outcome_message
from explorer.widgets.tensor_run import tensor_run_panel
from explorer.widgets.text import percent, plain, tensor_name
from remat_core.analysis import describe_reason, module_groups, time_overhead
from remat_core.graph import format_bytes
from remat_core.schedule import AllocatorConfig, AllocatorSettingError, describe_op, occurrences


STEP_KEY = "w_timeline_step"
# Bumped once a selection on the chart has picked a step: the chart gets a new key, which clears the
# selection (plotly does not redraw its animation frames while a selection is shown).
CHART_GENERATION = "timeline_chart_generation"

st.title("Timeline")
graph = state.graph()
solver, budget = state.solver(), state.budget()
options = options_key(state.solve_options(solver))
outcome = awaited_outcome(graph, solver, budget, options, state.time_limit())
if outcome is None:
    st.stop()
if outcome.schedule is None:
    outcome_message(outcome, solver, budget)
    st.page_link(page_path("schedule"), label="Choose another budget or solver", icon=":material/tune:")
    st.stop()

schedule = outcome.schedule
result = schedule.simulation
stats = schedule.stats
lane = (f", step time overhead {percent(time_overhead(stats))} over the host link "
        f"({format_bytes(stats['bytes_to_host'])} offloaded)" if "makespan" in stats else "")
st.caption(f"**{plain(solver)}** at a budget of **{format_bytes(budget)}**: peak {format_bytes(stats['peak'])}, "
           f"cost overhead {percent(stats['overhead'])}{lane}, {stats['recomputed_nodes']} tensors recomputed, "
           f"{len(schedule):,} ops. Press Play to walk through it; drag across the chart to pick a step and see "
           f"what is resident then.")

check = tensor_run_panel(state.model(), schedule, solve_key(graph, budget, solver, options, state.time_limit()))
generation = st.session_state.setdefault(CHART_GENERATION, 0)
event = st.plotly_chart(memory_figure(graph.content_hash, graph, solver, budget, options, state.time_limit(),
                                      check.measured_memory if check else None),
                        key=f"timeline_memory_{generation}", on_select="rerun",
                        selection_mode=("points", "box"))
if schedule.has_transfers:
    st.plotly_chart(transfer_figure(graph.content_hash, graph, solver, budget, options, state.time_limit()),
                    key="timeline_transfers")
    st.caption("The transfer lane, step by step under the memory above: each copy is a bar from the step it starts "
               "at to the step the computation has reached when it ends (the computations it hides behind); a cross "
               "marks a step that waited for a copy. The brown line is the host's bytes (dashed on the memory "
               "chart): device memory is the stack.")
picked = sorted({int(p["x"]) for p in event.selection.points if "x" in p}) if event and event.selection else []
if picked:
    st.session_state[STEP_KEY] = picked[0]
    st.session_state[CHART_GENERATION] = generation + 1
    st.rerun()
st.session_state.setdefault(STEP_KEY, max(result.peak_step, 0))
st.session_state[STEP_KEY] = min(st.session_state[STEP_KEY], len(result.ops) - 1)

left, right = st.columns([2, 3])
with left:
    step = st.number_input("Step", min_value=0, max_value=len(result.ops) - 1, step=1, key=STEP_KEY,
                           help="An op index; clicking the chart picks one too.")
    occurrence = occurrences(result)
    st.markdown(f"**{plain(describe_op(graph, result, step, occurrence[step]))}**  \n"
                f"Memory after it: **{format_bytes(result.memory[step])}**"
                + (f" of {format_bytes(budget)}" if budget else ""))
    st.caption("Solver's reason: " + plain(describe_reason(schedule.reason_at(step), graph=graph)))
    offloaded = {n for a, n in result.ops if a == "offload"}
    recomputed = sorted(n for n, c in result.compute_counts.items() if c > 1 or n in offloaded)
    if recomputed:
        default = result.ops[step][1] if result.ops[step][1] in recomputed else recomputed[0]
        chosen = st.selectbox("Why is this recomputed?" if not offloaded else "Why is this recomputed or offloaded?",
                              recomputed, index=recomputed.index(default),
                              format_func=lambda n: f"{tensor_name(graph, n)} · computed {result.compute_counts[n]}×"
                                                    + (" · offloaded" if n in offloaded else ""),
                              key="w_timeline_why")
        if st.button("Explain", icon=":material/help:", key="timeline_explain"):
            st.session_state[state.WHY_TENSOR] = chosen
            st.switch_page(page_path("why"))
    else:
        st.caption("This schedule recomputes nothing.")
with right:
    resident = result.resident_after(graph, step)
    nodes = sorted((graph.node(n) for n in resident), key=lambda n: -n.mem)
    st.markdown(f"**Resident after step {step}**: {len(nodes):,} tensors, "
                f"{format_bytes(sum(n.mem for n in nodes))}")
    st.dataframe([{"tensor": tensor_name(graph, n.id), "kind": n.kind, "size": format_bytes(n.mem),
                   "computed": f"{result.compute_counts.get(n.id, 0)}×" if not n.pinned else "pinned"}
                  for n in nodes], hide_index=True, width="stretch", height=260)

st.subheader("Memory map")
settings = st.text_input("Caching allocator settings", key="w_allocator", placeholder="PyTorch's defaults",
                         help="As PYTORCH_CUDA_ALLOC_CONF writes them: max_split_size_mb:128, "
                              "expandable_segments:True, roundup_power2_divisions:4 (comma-separated)")
try:
    allocator = AllocatorConfig.parse(settings)
except AllocatorSettingError as e:
    st.warning(f"{plain(str(e))}. The map below uses PyTorch's defaults.", icon=":material/tune:")
    allocator = AllocatorConfig()
figure, replayed, snapshot = memory_map(graph.content_hash, graph, solver, budget, options, state.time_limit(),
                                        allocator.text())
worst = max(range(len(replayed.fragmentation)), key=replayed.fragmentation.__getitem__, default=0)
st.caption(f"Where each tensor lives in a GPU's memory if PyTorch's CUDA caching allocator "
           f"({plain(allocator.text()) or 'default settings'}) serves this schedule: address by step, a rectangle "
           f"per block, one colour per tensor; grey is reserved but free. It reserves "
           f"**{format_bytes(replayed.peak_reserved)}** at most for {format_bytes(replayed.peak_allocated)} "
           f"allocated (the simulator's peak: {format_bytes(stats['peak'])}); fragmentation peaks at "
           f"{replayed.fragmentation[worst]:.0%} at step {worst}. Click a block to see why its tensor is where it is.")
chosen_block = st.plotly_chart(figure, key="timeline_memory_map", on_select="rerun", selection_mode="points")
clicked = [p["customdata"][0] for p in chosen_block.selection.points
           if p.get("customdata")] if chosen_block and chosen_block.selection else []
if clicked and clicked[0] in graph:
    st.session_state[state.WHY_TENSOR] = clicked[0]
    st.switch_page(page_path("why"))
snapshot_download(snapshot, graph.name, solver, budget, key="timeline_snapshot")

st.subheader("Lifetimes")
choice = lifetime_controls(module_groups(graph))
lifetimes, total = lifetime_figure(graph.content_hash, graph, solver, budget, options, state.time_limit(),
                                   choice.max_rows, choice.recomputed_only, choice.module)
if total:
    st.caption(f"{min(total, choice.max_rows):,} of {total:,} tensors, one row each (recomputed ones first, then the "
               f"largest; ordered by first computation): a bar while it is resident, coloured by kind; "
               f"recomputations in orange.")
    st.plotly_chart(lifetimes, key="timeline_lifetimes")
else:
    what = "recomputed" if choice.recomputed_only else "computed"
    st.info(f"This schedule has no {what} tensor" + (f" in {plain(choice.module)}." if choice.module else "."))
schedule_download(outcome, graph.name, solver, budget, key="timeline_download")
