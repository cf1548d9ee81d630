"""One real training step with a plan, three ways, on five models: the table of docs/pytorch.md.

Run: PYTHONPATH=$PWD .venv/bin/python bench/pytorch_bridge.py [--models resnet18,gpt2] [--vias plan,sac,compile]
     [--budgets 70,50,30] [--timing-runs 2] [--limit 300] [--redo]

For each zoo model (at a modest batch, so that a CPU step takes seconds) and each budget, two
plans: our best solver (the cheapest simulated schedule among ``OURS`` that fits) and
``torch-partitioner`` (PyTorch's own partitioner at the largest fraction that fits). Each plan
trains the model one real step per ``--via`` (:func:`remat_core.run.train_step`): the measured
activation peak, the step time against the eager step, and whether the gradients equal eager's.

Budgets are the weights and inputs plus 70/50/30% of the checkpoint-all peak's activation part:
weights cannot be rematerialized, and at these batches they would make 30% of the whole peak
infeasible. Results go to docs/figures/pytorch-bridge.json (after every route, so a long run keeps
what it measured; rows of other models already there stay, so models can be measured in separate
runs) and the table of every row into docs/pytorch.md, between its table markers. On a GPU,
bench/gpu_execute.py runs the same rows.

A run resumes: a route already measured for the same model, sizes, budget and plan is kept (``--redo``
measures it again). Each route has ``--limit`` seconds; one that runs over is recorded as timed out
(not a hang), and a model whose compiled step timed out is not compiled again at its other budgets.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from remat_core import InfeasibleBudget, checkpoint_all_peak, format_bytes, memory_lower_bound, solve
from remat_core.frontends import trace_zoo_model
from remat_core.run import ROUTES, train_step
from remat_core.solvers import solver_names

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "resnet18": {"batch_size": 4, "image_size": 112},
    "resnet50": {"batch_size": 2, "image_size": 112},
    "mobilenet_v2": {"batch_size": 4, "image_size": 112},
    "gpt2": {"batch_size": 1, "seq_len": 1024, "depth": 4},
    "unet": {"batch_size": 1, "image_size": 192},
}
"""Zoo models and the sizes they are measured at on a shared two-core CPU: a step takes seconds, an Inductor
compile minutes (GPT-2 has 4 of its 12 blocks, so that its compile fits the time limit). Smaller inputs would
let a weight's gradient, or GPT-2's logits and tied-embedding gradients, set a lower bound above most budgets."""

OURS = ("rotor", "dtr", "chen-greedy", "greedy-size")
"""Our quick solvers; the cheapest that fits a budget is "our best"."""

TORCH = "torch-partitioner"
TABLE_START, TABLE_END = "<!-- pytorch-bridge table -->", "<!-- end of pytorch-bridge table -->"


def run(models: list[str], vias: list[str], shares: list[int], timing_runs: int, trace: Callable[[str], Any],
        sizes: dict[str, dict[str, int]], out: Path, document: Path | None, limit: float = 300,
        redo: bool = False) -> list[dict[str, Any]]:
    """Measure every row (``trace(model)`` gives its graph, traced at ``sizes[model]``) and write the
    results (and the table, when ``document`` is given). Routes already in ``out`` for the same sizes are
    kept unless ``redo``; each route has ``limit`` seconds."""
    done = {} if redo else {_key(r): r for r in _read(out) if r.get("sizes") == sizes.get(r["model"])}
    for model in models:
        wanted = [(share, label) for share in shares for label in ("ours", TORCH)]
        if all(_complete(done.get((model, -share, label)), vias) for share, label in wanted):
            print(f"{model}: every row already measured at {sizes[model]}", flush=True)
            continue
        started = time.perf_counter()
        graph = trace(model)
        peak, pinned, lowest = checkpoint_all_peak(graph), graph.pinned_bytes, memory_lower_bound(graph)
        print(f"{model}: {len(graph)} nodes, weights and inputs {format_bytes(pinned)}, checkpoint-all activations "
              f"{format_bytes(peak - pinned)}, lower bound {format_bytes(lowest - pinned)} "
              f"(traced in {time.perf_counter() - started:.1f} s)", flush=True)
        compile_timed_out = None
        for share, label in wanted:
            budget = pinned + (peak - pinned) * share // 100
            row = done.get((model, -share, label))
            if _complete(row, vias):
                continue
            schedule, smallest = _plan(graph, budget, label)
            same = row is not None and row.get("budget") == budget and schedule is not None \
                and row.get("schedule_solver") == schedule.solver
            kept = row if same else {}
            row = {"model": model, "sizes": sizes[model], "share": share, "budget": budget, "solver": label,
                   "schedule_solver": None if schedule is None else schedule.solver,
                   "fits_from": None if smallest is None else smallest - pinned,
                   "lower_bound": lowest - pinned, "below_lower_bound": budget < lowest}
            if schedule is not None:
                row["simulated_peak"] = schedule.stats["peak"] - pinned
                row["overhead"] = schedule.stats["overhead"]
                row["fraction"] = schedule.solver_info.get("fraction")
                for via in vias:
                    if _measured(kept.get(via)):
                        row[via] = kept[via]
                    elif via == "compile" and compile_timed_out:
                        row[via] = {"error": f"not run: the compiled step took over {limit:.0f} s at "
                                             f"{compile_timed_out}", "timed_out": True}
                    else:
                        row[via] = _measure(graph, schedule, via, timing_runs, limit)
                        if via == "compile" and row[via].get("timed_out"):
                            compile_timed_out = f"{share}% ({label})"
                    _write(out, [row])
            _write(out, [row])
            print(_describe(row, vias), flush=True)
    merged = _write(out, [])
    if document is not None:
        _write_table(document, merged, vias)
    return merged


def _key(row: dict[str, Any]) -> tuple:
    return row["model"], -row["share"], row["solver"]


def _measured(result: dict[str, Any] | None) -> bool:
    """Whether a route's result is there to keep (measured, failed or timed out: not "not run")."""
    return result is not None and not str(result.get("error", "")).startswith("not run")


def _complete(row: dict[str, Any] | None, vias: list[str]) -> bool:
    """Whether ``row`` needs nothing more: refused (with the lower bound known), or every route in ``vias``
    recorded."""
    if row is None:
        return False
    if row.get("simulated_peak") is None:
        return "lower_bound" in row
    return all(_measured(row.get(v)) for v in vias)


def _plan(graph, budget: int, label: str):
    """(schedule or None, smallest budget known to fit when none does) for ``label`` at ``budget``: "ours" is
    the cheapest schedule among ``OURS``, otherwise torch's partitioner."""
    names = [n for n in OURS if n in solver_names()] if label == "ours" else [TORCH]
    schedules, smallest = [], []
    for name in names:
        try:
            schedules.append(solve(graph, budget, name))
        except InfeasibleBudget as refusal:
            smallest.append(refusal.smallest_feasible)
    best = min(schedules, key=lambda s: s.stats["cost"], default=None)
    return best, None if best is not None else min(filter(None, smallest), default=None)


class _TimedOut(BaseException):
    """A route ran past its limit (a BaseException, so that no library's ``except Exception`` swallows it)."""


@contextmanager
def _time_limit(seconds: float):
    def expire(signum, frame):
        raise _TimedOut

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _measure(graph, schedule, via: str, timing_runs: int, limit: float) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        with _time_limit(limit):
            report = train_step(graph, schedule, via, timing_runs=timing_runs)
    except _TimedOut:
        return {"error": f"timed out after {limit:.0f} s", "timed_out": True}
    except Exception as error:  # a failed route is a result of the benchmark, written down, not a crash of it
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
    summary = report.summary()
    summary["wall_seconds"] = time.perf_counter() - started
    return summary


def _read(out: Path) -> list[dict[str, Any]]:
    return json.loads(out.read_text())["rows"] if out.exists() else []


def _write(out: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge ``rows`` into the results already in ``out`` (a row replaces the one of the same model, budget and
    solver), so that models can be measured in separate runs; returns every row, in ``MODELS`` order."""
    kept = {_key(r): r for r in _read(out)}
    kept.update((_key(r), r) for r in rows)
    order = list(MODELS)
    merged = sorted(kept.values(), key=lambda r: (order.index(r["model"]) if r["model"] in order else len(order),
                                                 *_key(r)))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "rows": merged}, indent=1) + "\n")
    return merged


def _describe(row: dict[str, Any], vias: list[str]) -> str:
    if row.get("simulated_peak") is None:
        return f"  {row['share']}% {row['solver']}: no schedule fits (from {row['fits_from']} B)"
    parts = [f"  {row['share']}% {row['solver']} ({row['schedule_solver']}): simulated "
             f"{format_bytes(row['simulated_peak'])}"]
    for via in vias:
        result = row[via]
        parts.append(f"{via} {result['error']}" if "error" in result else
                     f"{via} {format_bytes(result['measured_peak'])} {result['step_seconds']:.2f}s "
                     f"grads {result['gradients_equal']}")
    return ", ".join(parts)


def table(rows: list[dict[str, Any]], vias: list[str]) -> str:
    """The markdown table of ``rows``: per plan, the simulated peak, each route's measured peak (and how far
    it is from the simulated one), the replay's own held bytes, step times against eager, gradients."""
    head = ["model, sizes (eager step: activations, time)", "budget", "plan by", "simulated"]
    head += [f"{via} peak" for via in vias] + (["plan holds"] if "plan" in vias else [])
    head += [f"{via} time" for via in vias] + ["gradients equal"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        lines.append("| " + " | ".join([_model_cell(row, vias), f"{row['share']}%", _solver_cell(row)]
                                       + _result_cells(row, vias, len(head) - 3)) + " |")
    return "\n".join(lines)


def _model_cell(row: dict[str, Any], vias: list[str]) -> str:
    sizes = ", ".join(f"{_SIZE_NAMES.get(k, k)} {v}" for k, v in row["sizes"].items())
    eager = next((row[v] for v in vias if isinstance(row.get(v), dict) and "eager_peak" in row[v]), None)
    measured = f"; eager {format_bytes(eager['eager_peak'])}, {eager['eager_step_seconds']:.2f} s" if eager else ""
    return f"{row['model']} ({sizes}{measured})"


_SIZE_NAMES = {"batch_size": "batch", "image_size": "px", "seq_len": "tokens", "depth": "blocks"}


def _solver_cell(row: dict[str, Any]) -> str:
    solver = row["schedule_solver"] or ("our solvers" if row["solver"] == "ours" else TORCH)
    if row["solver"] == TORCH and row.get("fraction") is not None:
        solver += f" @{row['fraction']:.3g}"
    return solver


def _result_cells(row: dict[str, Any], vias: list[str], width: int) -> list[str]:
    """The cells after the solver's: why there is no plan, or what each route measured."""
    simulated = row.get("simulated_peak")
    if simulated is None:
        return [_refusal(row)] + [""] * (width - 1)
    peaks, times, equal = [], [], []
    for via in vias:
        result = row.get(via) or {"error": "not run"}
        if "error" in result:
            error = result["error"]
            peaks.append("not run" if not _measured(result) else "timed out" if result.get("timed_out") else "failed")
            times.append("")
            equal.append(error if not _measured(result) or result.get("timed_out") else f"failed: {error}")
            continue
        peak = result["measured_peak"]
        peaks.append(f"{format_bytes(peak)} ({peak / simulated - 1:+.0%})")
        times.append(f"{result['step_seconds'] / result['eager_step_seconds']:.2f}x")
        equal.append(_gradients_cell(result))
    held = []
    if "plan" in vias:
        plan = row.get("plan") or {}
        held_peak = plan.get("details", {}).get("held_peak")
        held = ["" if held_peak is None else format_bytes(held_peak) + (" (= simulated)" if held_peak == simulated
                                                                        else "")]
    return [format_bytes(simulated)] + peaks + held + times + [" / ".join(equal)]


def _gradients_cell(result: dict[str, Any]) -> str:
    if result["gradients_equal"] is None:
        return "n/a"
    if result["gradients_equal"]:
        return "yes"
    return f"NO (off by {result['max_grad_diff'] / result['max_gradient']:.1e} of the largest)"


def _refusal(row: dict[str, Any]) -> str:
    """Why a row has no plan: the budget is below the graph's lower bound, or no plan of that solver fits."""
    lowest = row.get("lower_bound")
    if row.get("below_lower_bound"):
        return f"refused: below the lower bound ({format_bytes(lowest)})" if lowest is not None else \
            "refused: below the lower bound"
    if row["solver"] == TORCH and row.get("fits_from") is not None:
        return f"refused: no fraction fits (lowest simulated peak {format_bytes(row['fits_from'])})"
    return "refused: no schedule of these solvers fits"


def _write_table(document: Path, rows: list[dict[str, Any]], vias: list[str]) -> None:
    text = document.read_text()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    document.write_text(text[:start] + "\n" + table(rows, vias) + "\n" + text[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--vias", default=",".join(ROUTES))
    parser.add_argument("--budgets", default="70,50,30", help="percents of the checkpoint-all activation peak")
    parser.add_argument("--timing-runs", type=int, default=2, help="timed runs per step (the fastest counts)")
    parser.add_argument("--limit", type=float, default=300, help="seconds per route; over it, recorded as timed out")
    parser.add_argument("--redo", action="store_true", help="measure again what the results already hold")
    parser.add_argument("--out", default=str(ROOT / "docs" / "figures" / "pytorch-bridge.json"))
    parser.add_argument("--no-table", action="store_true", help="leave docs/pytorch.md alone")
    args = parser.parse_args()
    run(args.models.split(","), args.vias.split(","), [int(b) for b in args.budgets.split(",")], args.timing_runs,
        lambda model: trace_zoo_model(model, **MODELS[model]), MODELS, Path(args.out),
        None if args.no_table else ROOT / "docs" / "pytorch.md", args.limit, args.redo)


if __name__ == "__main__":
    main()
