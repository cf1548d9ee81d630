"""One real training step with a plan, three ways, on five models: the table of docs/pytorch.md.

Run: PYTHONPATH=$PWD .venv/bin/python bench/pytorch_bridge.py [--models resnet18,gpt2] [--vias plan,sac,compile]
     [--budgets 70,50,30] [--timing-runs 2]

For each zoo model (at a modest batch, so that a CPU step takes seconds) and each budget, two
plans: our best solver (the cheapest simulated schedule among ``OURS`` that fits) and
``torch-partitioner`` (PyTorch's own partitioner at the largest fraction that fits). Each plan
trains the model one real step per ``--via`` (:func:`remat_core.run.train_step`): the measured
activation peak, the step time against the eager step, and whether the gradients equal eager's.

Budgets are the weights and inputs plus 70/50/30% of the checkpoint-all peak's activation part:
weights cannot be rematerialized, and at these batches they would make 30% of the whole peak
infeasible. Results go to docs/figures/pytorch-bridge.json (after every row, so a long run keeps
what it measured; rows of other models already there stay, so models can be measured in separate
runs) and the table of every row into docs/pytorch.md, between its table markers. On a GPU,
bench/gpu_execute.py runs the same rows.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any, Callable

from remat_core import InfeasibleBudget, checkpoint_all_peak, format_bytes, memory_lower_bound, solve
from remat_core.frontends import trace_zoo_model
from remat_core.run import VIAS, train_step
from remat_core.solvers import solver_names

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "resnet18": {"batch_size": 4, "image_size": 112},
    "resnet50": {"batch_size": 2, "image_size": 112},
    "mobilenet_v2": {"batch_size": 4, "image_size": 112},
    "gpt2": {"batch_size": 2, "seq_len": 64},
    "unet": {"batch_size": 1, "image_size": 96},
}
"""Zoo models and the sizes they are measured at on a CPU (two cores: a step takes seconds)."""

OURS = ("rotor", "dtr", "chen-greedy", "greedy-size")
"""Our quick solvers; the cheapest that fits a budget is "our best"."""

TORCH = "torch-partitioner"
TABLE_START, TABLE_END = "<!-- pytorch-bridge table -->", "<!-- end of pytorch-bridge table -->"


def run(models: list[str], vias: list[str], shares: list[int], timing_runs: int, trace: Callable[[str], Any],
        sizes: dict[str, dict[str, int]], out: Path, document: Path | None) -> list[dict[str, Any]]:
    """Measure every row (``trace(model)`` gives its graph, traced at ``sizes[model]``) and write the
    results (and the table, when ``document`` is given)."""
    rows: list[dict[str, Any]] = []
    for model in models:
        started = time.perf_counter()
        graph = trace(model)
        peak, pinned, lowest = checkpoint_all_peak(graph), graph.pinned_bytes, memory_lower_bound(graph)
        print(f"{model}: {len(graph)} nodes, weights and inputs {format_bytes(pinned)}, checkpoint-all activations "
              f"{format_bytes(peak - pinned)} (traced in {time.perf_counter() - started:.1f} s)", flush=True)
        for share in shares:
            budget = pinned + (peak - pinned) * share // 100
            for label, schedule, smallest in _plans(graph, budget):
                row = {"model": model, "sizes": sizes[model], "share": share, "budget": budget, "solver": label,
                       "schedule_solver": None if schedule is None else schedule.solver,
                       "fits_from": None if smallest is None else smallest - pinned,
                       "below_lower_bound": budget < lowest}
                if schedule is not None:
                    row["simulated_peak"] = schedule.stats["peak"] - pinned
                    row["overhead"] = schedule.stats["overhead"]
                    row["fraction"] = schedule.solver_info.get("fraction")
                    for via in vias:
                        row[via] = _measure(graph, schedule, via, timing_runs)
                rows.append(row)
                _write(out, rows)
                print(_describe(row, vias), flush=True)
    merged = _write(out, rows)
    if document is not None:
        _write_table(document, merged, vias)
    return merged


def _plans(graph, budget: int):
    """(label, schedule or None, smallest budget known to fit when none does) for our best solver and for
    torch's partitioner at ``budget``."""
    ours, smallest = [], []
    for name in OURS:
        if name in solver_names():
            try:
                ours.append(solve(graph, budget, name))
            except InfeasibleBudget as refusal:
                smallest.append(refusal.smallest_feasible)
    best = min(ours, key=lambda s: s.stats["cost"], default=None)
    yield "ours", best, None if best is not None else min(filter(None, smallest), default=None)
    try:
        yield TORCH, solve(graph, budget, TORCH), None
    except InfeasibleBudget as refusal:
        yield TORCH, None, refusal.smallest_feasible


def _measure(graph, schedule, via: str, timing_runs: int) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        report = train_step(graph, schedule, via, timing_runs=timing_runs)
    except Exception as error:  # a failed route is a result of the benchmark, written down, not a crash of it
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
    summary = report.summary()
    summary["wall_seconds"] = time.perf_counter() - started
    return summary


def _write(out: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge ``rows`` into the results already in ``out`` (a row replaces the one of the same model, budget and
    solver), so that models can be measured in separate runs; returns every row, in ``MODELS`` order."""
    def key(row: dict[str, Any]) -> tuple:
        return row["model"], -row["share"], row["solver"]

    kept = {key(r): r for r in (json.loads(out.read_text())["rows"] if out.exists() else [])}
    kept.update((key(r), r) for r in rows)
    order = list(MODELS)
    merged = sorted(kept.values(), key=lambda r: (order.index(r["model"]) if r["model"] in order else len(order),
                                                 *key(r)))
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
    """The markdown table of ``rows``."""
    head = ["model (eager activations)", "budget", "plan by", "simulated"]
    head += [f"{via} peak" for via in vias] + [f"{via} time" for via in vias] + ["gradients equal"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        eager = next((row[v] for v in vias if isinstance(row.get(v), dict) and "eager_peak" in row[v]), None)
        model = f"{row['model']} ({format_bytes(eager['eager_peak'])}, {eager['eager_step_seconds']:.2f} s)" \
            if eager else row["model"]
        solver = row["schedule_solver"] or ("our solvers" if row["solver"] == "ours" else TORCH)
        if row["solver"] == TORCH and row.get("fraction") is not None:
            solver += f" @{row['fraction']:.3g}"
        if row.get("simulated_peak") is None:
            fits = f" (fits from {format_bytes(row['fits_from'])})" if row.get("fits_from") is not None else ""
            why = "below the lower bound" if row.get("below_lower_bound") else f"no schedule fits{fits}"
            lines.append(f"| {model} | {row['share']}% | {solver} | {why} |"
                         + " |" * (len(head) - 4))
            continue
        peaks, times, equal = [], [], []
        for via in vias:
            result = row.get(via) or {"error": "not run"}
            if "error" in result:
                peaks.append("failed")
                times.append("")
                equal.append("failed")
                continue
            without = result.get("peak_without_gradients")
            peaks.append(format_bytes(result["measured_peak"]) + (
                f" ({format_bytes(without)} without gradients)" if without and without < 0.95 * result["measured_peak"]
                else ""))
            times.append(f"{result['step_seconds'] / result['eager_step_seconds']:.2f}x")
            equal.append({True: "yes", False: "NO", None: "n/a"}[result["gradients_equal"]])
        lines.append(f"| {model} | {row['share']}% | {solver} | {format_bytes(row['simulated_peak'])} | "
                     + " | ".join(peaks + times) + f" | {' / '.join(equal)} |")
    return "\n".join(lines)


def _write_table(document: Path, rows: list[dict[str, Any]], vias: list[str]) -> None:
    text = document.read_text()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    document.write_text(text[:start] + "\n" + table(rows, vias) + "\n" + text[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--vias", default=",".join(VIAS))
    parser.add_argument("--budgets", default="70,50,30", help="percents of the checkpoint-all activation peak")
    parser.add_argument("--timing-runs", type=int, default=2, help="timed runs per step (the fastest counts)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "figures" / "pytorch-bridge.json"))
    parser.add_argument("--no-table", action="store_true", help="leave docs/pytorch.md alone")
    args = parser.parse_args()
    run(args.models.split(","), args.vias.split(","), [int(b) for b in args.budgets.split(",")], args.timing_runs,
        lambda model: trace_zoo_model(model, **MODELS[model]), MODELS, Path(args.out),
        None if args.no_table else ROOT / "docs" / "pytorch.md")


if __name__ == "__main__":
    main()
