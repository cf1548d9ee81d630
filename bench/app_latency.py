"""How fast does the explorer answer a budget change? AppTest time from slider move to new metrics.

For each graph: load it as the session's model, open the Schedule page, let the background
Pareto sweep of the solver finish (that is the "warm cache"), then move the budget slider and time
``AppTest.run()`` until the new metrics are there. Two cases per slider move:

- ``revisit``: a budget solved before (the exact schedule comes from the cache);
- ``new``: a budget never solved (the sweep is cached, the exact solve at that budget runs).

AppTest reruns the whole page script; a browser reruns only the slider's fragment, so these are
upper bounds for what a user waits. Goal: under 300 ms warm.

Run: PYTHONPATH=$PWD .venv/bin/python bench/app_latency.py [--solver NAME] [--moves N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from explorer import state
from explorer.cache import options_key, sweep_runner
from explorer.zoo import traced_model, zoo_available
from remat_core import ComputeGraph, list_solvers
from remat_core.generators import training_chain

ROOT = Path(__file__).resolve().parents[1]
GOAL_MS = 300.0


def bench_graphs() -> list[tuple[str, ComputeGraph]]:
    """resnet50 at module level, and a ~2,000-node op-level graph (a 22-layer BERT-style encoder).

    Without the zoo and tracer in the build, a generated 1,000-layer training chain (2,002 nodes)
    stands in for the op-level graph, and resnet50 is skipped.
    """
    if not zoo_available():
        print("resnet50 (module level): skipped, the zoo and tracer are not in this build")
        return [("training chain, 1,000 layers, generated", training_chain(1000, mem=2**20))]
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
    key = sweep_runner().submit(graph, solver, options_key({}), at.session_state[state.TIME_LIMIT])
    sweep_runner().status(key, wait=3600)
    at.run()
    if at.exception:
        raise RuntimeError(f"the Schedule page failed: {at.exception[0].message}")
    return at


def time_move(at: AppTest, value: float) -> float:
    at.slider(key="w_budget").set_value(value)
    started = time.perf_counter()
    at.run()
    elapsed = (time.perf_counter() - started) * 1e3
    if at.exception or not (at.metric or at.warning):
        raise RuntimeError("no metrics after a slider move")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--solver", default=None, help="solver to time (default: the app's default solver)")
    parser.add_argument("--moves", type=int, default=12, help="slider moves per case")
    args = parser.parse_args()
    solver = args.solver or state.default_solver()
    print(f"solver {solver}; registered: {', '.join(s.name for s in list_solvers())}")
    print(f"{'graph':<66} {'case':<8} {'median ms':>10} {'max ms':>8}  goal {GOAL_MS:.0f} ms")
    for name, graph in bench_graphs():
        at = open_schedule_page(graph, solver)
        slider = at.slider(key="w_budget")
        low, high, step = slider.min, slider.max, slider.step
        count = max(2, int((high - low) / step))
        new_values = [low + step * round(count * (k + 0.5) / args.moves) for k in range(args.moves)]
        fresh = [time_move(at, v) for v in new_values]
        again = [time_move(at, v) for v in new_values]
        for case, runs in (("new", fresh), ("revisit", again)):
            verdict = "ok" if statistics.median(runs) < GOAL_MS else "over"
            print(f"{name:<66} {case:<8} {statistics.median(runs):>10.1f} {max(runs):>8.1f}  {verdict}")


if __name__ == "__main__":
    main()
