"""How fast does the explorer answer a budget change? AppTest time from slider move to new metrics.

For each graph: load it as the session's model, open the Schedule page, let the background
Pareto sweep of the solver finish (that is the "warm cache"), then move the budget slider and time
``AppTest.run()`` until the new metrics are there. Three figures per graph:

- ``new``: a budget never solved. The page waits up to ``SOLVE_WAIT_SECONDS`` for the exact solve,
  then shows the sweep's estimate and leaves the solve running in the background;
- ``new, exact``: from the slider move until that background solve is done (the exact metrics);
- ``revisit``: a budget solved before (the exact schedule is kept).

AppTest reruns the whole page script; a browser reruns only the slider's fragment, so these are
upper bounds for what a user waits. Goal: under 300 ms warm.

Run: PYTHONPATH=$PWD .venv/bin/python bench/app_latency.py [--solver NAME] [--moves N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from pathlib import Path

from streamlit.testing.v1 import AppTest

from explorer import state
from explorer.jobs.results import options_key, solve_outcome, sweep_status
from explorer.state.zoo import traced_model
from remat_core import ComputeGraph, list_solvers

ROOT = Path(__file__).resolve().parents[1]
GOAL_MS = 300.0


def bench_graphs() -> list[tuple[str, ComputeGraph]]:
    """resnet50 at module level, and a ~2,000-node op-level graph (a 22-layer BERT-style encoder)."""
    resnet = traced_model("resnet50", "module", "flops", (("batch_size", 8),)).graph
    encoder = traced_model("transformer", "op", "flops", (("batch_size", 8), ("depth", 22))).graph
    return [(f"resnet50, module level, batch 8 ({len(resnet):,} nodes)", resnet),
            (f"transformer depth 22, op level, batch 8 ({len(encoder):,} nodes)", encoder)]


def open_schedule_page(graph: ComputeGraph, solver: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600).run()
    at.session_state[state.MODEL] = state.Model(graph, "bench")
    at.session_state[state.BUDGET] = state.default_budget(graph)
    at.session_state[state.SOLVER] = solver
    at.switch_page("pages/schedule.py").run()
    sweep_status(graph, solver, options_key({}), at.session_state[state.TIME_LIMIT], wait=3600)
    at.run()
    if at.exception:
        raise RuntimeError(f"the Schedule page failed: {at.exception[0].message}")
    return at


def time_move(at: AppTest, value: float) -> tuple[float, float, str]:
    """Milliseconds until the page answers, until the exact solve at that budget is done, and what
    the page showed: ``exact`` metrics (or an infeasibility warning), the sweep's ``estimate``, or
    ``pending`` (no sweep point fits that budget: only the "solving" note until the exact result)."""
    at.slider(key="w_budget").set_value(value)
    started = time.perf_counter()
    at.run()
    shown = (time.perf_counter() - started) * 1e3
    if at.exception:
        raise RuntimeError(f"the Schedule page failed: {at.exception[0].message}")
    graph, solver = at.session_state[state.MODEL].graph, at.session_state[state.SOLVER]
    solve_outcome(graph, solver, at.session_state[state.BUDGET], options_key({}), at.session_state[state.TIME_LIMIT])
    exact = (time.perf_counter() - started) * 1e3
    if any(m.label.startswith("≈") for m in at.metric):
        return shown, exact, "estimate"
    return shown, exact, "exact" if (at.metric or at.warning) else "pending"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--solver", default=None, help="solver to time (default: the app's default solver)")
    parser.add_argument("--moves", type=int, default=12, help="slider moves per case")
    args = parser.parse_args()
    solver = args.solver or state.default_solver()
    print(f"solver {solver}; registered: {', '.join(s.name for s in list_solvers())}")
    print(f"{'graph':<62} {'case':<11} {'median ms':>10} {'max ms':>8}  goal {GOAL_MS:.0f} ms")
    for name, graph in bench_graphs():
        at = open_schedule_page(graph, solver)
        slider = at.slider(key="w_budget")
        low, high, step = slider.min, slider.max, slider.step
        count = max(2, int((high - low) / step))
        new_values = [low + step * round(count * (k + 0.5) / args.moves) for k in range(args.moves)]
        fresh = [time_move(at, v) for v in new_values]
        again = [time_move(at, v) for v in new_values]
        shown = Counter(f[2] for f in fresh)
        for case, runs in (("new", [f[0] for f in fresh]), ("new, exact", [f[1] for f in fresh]),
                           ("revisit", [a[0] for a in again])):
            verdict = "ok" if statistics.median(runs) < GOAL_MS else "over"
            print(f"{name:<62} {case:<11} {statistics.median(runs):>10.1f} {max(runs):>8.1f}  {verdict}")
        print(f"{'':<62} new budgets answered: " + ", ".join(f"{n} {k}" for k, n in sorted(shown.items())))


if __name__ == "__main__":
    main()
