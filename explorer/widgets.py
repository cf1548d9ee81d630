"""Widgets and blocks several pages share: the sidebar, solver pickers, option widgets built from
each solver's declared options, the budget slider with its marks, metrics, and the lifetime chart's controls
(downloads: :mod:`explorer.exports`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

import streamlit as st

from remat_core import BudgetError, Schedule, get_solver, list_solvers, parse_budget
from remat_core.analysis import CurvePoint, graph_summary, reported_gap
from remat_core.graph import format_bytes
from remat_core.viz import ByteUnit, LOWER_BOUND, MARK_LINES, PEAK, unit_for

from . import state
from .cache import Outcome

SLIDER_STEPS = 200
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def plain(text: Any) -> str:
    """Text from a file shown in markdown as typed (no links, images, emphasis or HTML)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


def tensor_name(graph, node_id: str) -> str:
    """A node's label, with its module path when the label alone does not say where it is
    (module-level labels such as ``bn1 fwd`` repeat in every block)."""
    node = graph.node(node_id)
    name = node.display_name
    if node.module and not name.startswith(node.module):
        return f"{name} · {node.module}"
    return name


def percent(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "—"
    return f"{value:+.1%}" if signed else f"{value:.1%}"


# -- budget slider ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class BudgetScale:
    """How the budget slider maps to bytes: one unit, a range around the two marks, a round step."""

    unit: ByteUnit
    low: float
    high: float
    step: float
    lower_bound: int
    peak: int

    @property
    def decimals(self) -> int:
        return max(0, -math.floor(math.log10(self.step)))

    @property
    def format(self) -> str:
        return f"%.{self.decimals}f {self.unit.name}"

    def to_bytes(self, value: float) -> int:
        return int(round(value * self.unit.size))

    def to_units(self, nbytes: int) -> float:
        """The slider position showing ``nbytes``: the first step at or above it, within the range."""
        steps = round((nbytes / self.unit.size - self.low) / self.step)
        if self.to_bytes(self.low + steps * self.step) < nbytes:  # compared in bytes: floats blur a few
            steps += 1
        return round(min(max(self.low + steps * self.step, self.low), self.high), self.decimals)


def _nice_step(raw: float) -> float:
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def budget_scale(lower_bound: int, peak: int) -> BudgetScale:
    """A slider from a little under the lower bound to a little over the checkpoint-all peak."""
    span = max(peak - lower_bound, peak * 0.1, 1)
    unit = unit_for(peak)
    step = float(_nice_step(span / unit.size / SLIDER_STEPS))
    low = max(0.0, math.floor((lower_bound - 0.04 * span) / unit.size / step) * step)
    high = math.ceil((peak + 0.06 * span) / unit.size / step) * step
    return BudgetScale(unit, float(round(low, 12)), float(round(high, 12)), step, lower_bound, peak)


def _budget_changed(key: str, scale: BudgetScale) -> None:
    state.set_budget(scale.to_bytes(st.session_state[key]))


def budget_slider(scale: BudgetScale, key: str = "w_budget", label: str = "Memory budget") -> int:
    """The session's budget as a slider (in the scale's unit) with its marks; returns it in bytes."""
    st.session_state[key] = scale.to_units(state.budget())
    _slider(scale, key, label, on_change=_budget_changed, args=(key, scale))
    return state.budget()


def other_budget_slider(scale: BudgetScale, key: str, label: str, default: int) -> int:
    """A second budget, independent of the session's (the Why page's comparison); returns bytes."""
    st.session_state.setdefault(key, scale.to_units(default))
    _slider(scale, key, label)
    return scale.to_bytes(st.session_state[key])


def _slider(scale: BudgetScale, key: str, label: str, **callback) -> None:
    st.slider(label, min_value=scale.low, max_value=scale.high, step=scale.step, format=scale.format, key=key,
              help=f"Peak memory allowed, parameters and inputs included. No schedule fits under the lower bound "
                   f"({format_bytes(scale.lower_bound)}); the checkpoint-all peak ({format_bytes(scale.peak)}) "
                   f"needs no recomputation.", **callback)
    budget_marks(scale)


def budget_marks(scale: BudgetScale) -> None:
    """The lower bound and the checkpoint-all peak marked under the slider's track, in the colours of their
    lines on the Pareto chart (red is the budget's there)."""
    def where(nbytes: int) -> float:
        return 100 * (nbytes / scale.unit.size - scale.low) / max(scale.high - scale.low, 1e-12)
    marks = [(where(scale.lower_bound), MARK_LINES[LOWER_BOUND][0], f"{LOWER_BOUND} {format_bytes(scale.lower_bound)}"),
             (where(scale.peak), MARK_LINES[PEAK][0], f"{PEAK} {format_bytes(scale.peak)}")]
    items = "".join(
        f'<div style="position:absolute;left:{x:.2f}%;transform:translateX(-{min(max(x, 0), 100):.0f}%);'
        f'white-space:nowrap;color:{color};font-size:0.78rem;">▲ {text}</div>'
        for x, color, text in marks)
    st.markdown(f'<div style="position:relative;height:1.3rem;margin:-0.9rem 0.6rem 0.6rem 0.6rem;">{items}</div>',
                unsafe_allow_html=True)


def typed_budget(peak: int, key: str = "w_budget_text") -> None:
    """A text box for an exact budget (``512MiB``, ``1.5GB``, ``70%``), applied once when it is entered;
    a bad entry stays in the box with a message."""
    st.text_input("Exact budget", key=key, placeholder="512MiB, 1.5GB, 70%", on_change=_budget_typed,
                  args=(key, peak), help="Bytes, a number with a unit (KiB, MiB, GiB, KB, MB, GB) or a percent of "
                                         "the checkpoint-all peak. Applied when you press Enter; the slider "
                                         "moves there.")
    if error := st.session_state.get(_typed_error_key(key)):
        st.warning(plain(error))


def _typed_error_key(key: str) -> str:
    return f"{key}_error"


def _budget_typed(key: str, peak: int) -> None:
    """Apply the typed budget and empty the box, so that later slider moves are not overridden by it."""
    text = st.session_state[key].strip()
    st.session_state[_typed_error_key(key)] = None
    if not text:
        return
    try:
        state.set_budget(parse_budget(text, peak))
    except BudgetError as e:
        st.session_state[_typed_error_key(key)] = str(e)
        return
    st.session_state[key] = ""


# -- solvers and options ----------------------------------------------------------------------------

def solver_label(name: str) -> str:
    spec = get_solver(name)
    return f"{name} · {'exact' if spec.exact else 'heuristic'}"


def _solver_changed(key: str) -> None:
    st.session_state[state.SOLVER] = st.session_state[key]
    st.session_state[state.COMPARE] = [s for s in state.compared() if s != st.session_state[key]]


def _compare_changed(key: str) -> None:
    st.session_state[state.COMPARE] = list(st.session_state[key])


def solver_picker(key: str = "w_solver") -> str:
    """Choose the session's solver from the registry; returns its name."""
    names = [s.name for s in list_solvers()]
    st.session_state[key] = state.solver()
    st.selectbox("Solver", names, key=key, format_func=solver_label, on_change=_solver_changed, args=(key,),
                 help="Every solver in the registry; each schedule is checked by the one simulator.")
    st.caption(plain(get_solver(state.solver()).description))
    return state.solver()


def compare_picker(key: str = "w_compare") -> list[str]:
    """Choose solvers to compare with the session's solver."""
    others = [s.name for s in list_solvers() if s.name != state.solver()]
    st.session_state[key] = state.compared()
    st.multiselect("Compare with", others, key=key, on_change=_compare_changed, args=(key,),
                   placeholder="other solvers" if others else "no other solver is registered",
                   disabled=not others, help="Their Pareto curves and exact results at the budget appear beside.")
    return state.compared()


def _option_changed(key: str, solver: str, option: str, default: Any) -> None:
    state.set_option(solver, option, st.session_state[key], default)


def option_widgets(solver: str) -> dict[str, Any]:
    """One widget per option the solver declares (type, range, choices); returns the chosen values."""
    spec = get_solver(solver)
    chosen = state.options_of(solver)
    if not spec.options:
        st.caption(f"{plain(solver)} has no options.")
    for option in spec.options:
        key = f"w_option_{solver}_{option.name}"
        st.session_state[key] = chosen.get(option.name, option.default)
        common = {"key": key, "help": option.help, "on_change": _option_changed,
                  "args": (key, solver, option.name, option.default)}
        if option.type is bool:
            st.toggle(option.name, **common)
        elif option.choices:
            st.selectbox(option.name, list(option.choices), **common)
        elif option.type in (int, float):
            cast = option.type
            st.number_input(option.name, min_value=cast(option.low) if option.low is not None else None,
                            max_value=cast(option.high) if option.high is not None else None,
                            step=1 if cast is int else None, **common)
        elif option.type is str:
            st.text_input(option.name, **common)
        else:
            st.caption(f"{plain(option.name)}: a {option.type.__name__} option, left at its default "
                       f"({plain(repr(option.default))}).")
    return state.options_of(solver)


def time_limit_input(key: str = "w_time_limit") -> float:
    st.session_state[key] = state.time_limit()
    st.number_input("Time limit per solve (s)", min_value=0.5, max_value=600.0, step=0.5, key=key,
                    on_change=lambda: st.session_state.__setitem__(state.TIME_LIMIT, st.session_state[key]),
                    help="For solvers that search (MILP, CP): they return the best schedule found in time.")
    return state.time_limit()


# -- results ----------------------------------------------------------------------------------------

def schedule_metrics(container, schedule: Schedule, budget: int) -> None:
    """Peak, cost overhead, recomputed tensors and solve time of an exact solve, in four metrics."""
    stats = schedule.stats
    _metrics(container, stats["peak"], stats["overhead"], stats["recomputed_nodes"], stats["recomputes"],
             f"{stats.get('solve_seconds', 0.0) * 1e3:,.0f} ms", f"{len(schedule):,} ops", budget, estimate=False)


def estimate_metrics(container, point: CurvePoint, budget: int) -> None:
    """The same four metrics from the sweep point whose schedule fits ``budget`` (shown while solving)."""
    extra = sum(c - 1 for c in point.recomputed.values())
    _metrics(container, point.peak, point.overhead, len(point.recomputed), extra, "solving…",
             f"sweep point at {format_bytes(point.budget)}", budget, estimate=True)


def _metrics(container, peak: int, overhead: float, recomputed: int, extra: int, time_text: str, time_note: str,
             budget: int, estimate: bool) -> None:
    mark = "≈ " if estimate else ""
    a, b, c, d = container.columns(4)
    a.metric(f"{mark}Peak memory", format_bytes(peak), delta=f"{peak / budget:.0%} of budget" if budget else None,
             delta_color="off", delta_arrow="off")
    b.metric(f"{mark}Cost overhead", percent(overhead), delta="over checkpoint-all", delta_color="off",
             delta_arrow="off")
    c.metric(f"{mark}Recomputed tensors", f"{recomputed:,}", delta=f"{extra:,} extra computations",
             delta_color="off", delta_arrow="off")
    d.metric("Solve time", time_text, delta=time_note, delta_color="off", delta_arrow="off")


def outcome_message(outcome: Outcome, solver: str, budget: int, smallest_known: int | None = None,
                    button_key: str | None = None) -> None:
    """Say why there is no schedule: infeasible (naming the smallest feasible budget known: the solver's own or,
    when smaller, ``smallest_known`` from its sweep) or an error."""
    if outcome.error:
        st.error(f"{plain(solver)} failed: {plain(outcome.error)}")
        return
    known = [b for b in (outcome.smallest_feasible, smallest_known) if b is not None]
    smallest = min(known) if known else None
    text = f"**{format_bytes(budget)} is infeasible for {plain(solver)}**: {plain(outcome.infeasible)}."
    if smallest is None:
        st.warning(text + " No feasible budget is known for it yet.", icon=":material/block:")
        return
    st.warning(text + f" The smallest feasible budget it knows is **{format_bytes(smallest)}**.",
               icon=":material/block:")
    if button_key and st.button(f"Use {format_bytes(smallest)}", key=button_key, icon=":material/arrow_forward:"):
        state.set_budget(smallest)
        st.rerun()


def log_scale_toggle(key: str = "w_pareto_log") -> bool:
    """The Pareto chart's log-scale switch for the overhead axis (kept in the session across pages)."""
    st.session_state[key] = state.pareto_log()
    st.toggle("Log-scale overhead", key=key, on_change=lambda: state.set_pareto_log(st.session_state[key]),
              help="Near the lower bound overheads span orders of magnitude: a log axis tells the solvers apart "
                   "there. Budgets that need no recomputation (0 %) have no place on it.")
    return state.pareto_log()


GAP_COLUMN = "MIP gap"
GAP_HELP = ("The exact solver's relative optimality gap, (cost − proven lower bound) / cost: 0 means proved optimal "
            "(for the solver's formulation); a positive gap means the time limit ran out first.")


def comparison_rows(outcomes: dict[str, Outcome | None]) -> list[dict[str, Any]]:
    """The table of the solvers at the current budget, one row per solver (in the mapping's order).

    A ``MIP gap`` column appears when any schedule's solver reports a gap
    (:func:`remat_core.analysis.pareto.reported_gap`); solvers that report none show a dash there.
    """
    gaps = {name: reported_gap(o.schedule.solver_info) if o is not None and o.schedule is not None else None
            for name, o in outcomes.items()}
    rows = []
    for name, outcome in outcomes.items():
        if outcome is None or outcome.schedule is None:
            status = "solving…" if outcome is None else ("error" if outcome.error else "infeasible")
            row = {"solver": name, "status": status, "peak": None, "overhead": None, "recomputed": None,
                   "solve ms": None}
        else:
            stats = outcome.schedule.stats
            row = {"solver": name, "status": "exact solver" if get_solver(name).exact else "heuristic",
                   "peak": format_bytes(stats["peak"]), "overhead": percent(stats["overhead"]),
                   "recomputed": stats["recomputed_nodes"], "solve ms": round(stats["solve_seconds"] * 1e3, 1)}
        if any(g is not None for g in gaps.values()):
            row[GAP_COLUMN] = gap_text(gaps[name])
        rows.append(row)
    return rows


def gap_text(gap: float | None) -> str:
    """A reported optimality gap in the table: a dash for none, ``0 % (optimal)``, else three digits."""
    if gap is None:
        return "—"
    return "0% (optimal)" if gap == 0 else f"{100 * gap:.3g}%"


# -- timeline ---------------------------------------------------------------------------------------

LIFETIME_ROWS = 60
"""Rows the lifetime chart shows until the user asks for more."""
MAX_LIFETIME_ROWS = 500
LIFETIME_SHOW = {"all": "All tensors", "recomputed": "Recomputed only"}


@dataclass(frozen=True)
class LifetimeChoice:
    """Which rows the lifetime chart shows (see :func:`remat_core.viz.timeline.lifetime_candidates`)."""

    max_rows: int
    recomputed_only: bool
    module: str | None


def lifetime_controls(modules: Sequence[str]) -> LifetimeChoice:
    """The lifetime chart's row controls: all or recomputed tensors, a module to look inside, how many rows."""
    show, where, count = st.columns([2, 2, 1])
    picked = show.segmented_control("Rows", list(LIFETIME_SHOW), format_func=LIFETIME_SHOW.get, default="all",
                                    required=True, key="w_lifetime_show")
    module = where.selectbox("Module", modules, index=None, placeholder="every module" if modules else
                             "this graph has no module paths", disabled=not modules, key="w_lifetime_module",
                             help="Only the tensors of this module (and the modules inside it).")
    rows = count.number_input("At most", min_value=10, max_value=MAX_LIFETIME_ROWS, value=LIFETIME_ROWS, step=10,
                              key="w_lifetime_rows", help="Rows drawn: recomputed tensors first, then the largest.")
    return LifetimeChoice(int(rows), picked == "recomputed", module)


# -- sidebar ----------------------------------------------------------------------------------------

def sidebar_model() -> None:
    """The sidebar's model block: name, where it came from, nodes, parameters, checkpoint-all peak."""
    model = state.model()
    summary = graph_summary(model.graph)
    with st.sidebar:
        st.markdown("#### Current model")
        st.markdown(f"**{plain(summary.name)}**")
        st.caption(plain(model.origin))
        parameters = (f"{model.parameters / 1e6:.2f} M · " if model.parameters else "") + \
            format_bytes(summary.param_bytes)
        st.markdown(f"Nodes **{summary.nodes:,}** · edges {summary.edges:,}  \n"
                    f"Parameters **{parameters}**  \n"
                    f"Checkpoint-all peak **{format_bytes(summary.checkpoint_all_peak)}**  \n"
                    f"Lower bound {format_bytes(summary.lower_bound)}")


def sidebar_schedule() -> None:
    """The sidebar's schedule block: the current budget and solver.

    The Schedule page draws it from inside its budget fragment, so that it follows the slider
    without a full rerun; every other page gets it from the frame.
    """
    peak = graph_summary(state.graph()).checkpoint_all_peak
    budget = state.budget()
    compare = state.compared()
    with st.sidebar:
        st.divider()
        st.markdown("#### Schedule")
        st.markdown(f"Budget **{format_bytes(budget)}** ({budget / max(peak, 1):.0%} of peak)  \n"
                    f"Solver **{plain(state.solver())}**" +
                    (f"  \nCompared with {', '.join(plain(c) for c in compare)}" if compare else ""))
