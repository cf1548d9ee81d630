"""What users deploy beside what we plan, on the same meter: the tables and figure of docs/deployed.md.

Run: PYTHONPATH=$PWD .venv/bin/python bench/deployed.py [--models hf-llama,resnet18] [--budgets 5]
     [--timing-runs 3] [--compile]

For each model (every Hugging Face model of the zoo and three other zoo models, at sizes a CPU step takes a
fraction of a second at), traced once at op level with measured op times:

- **eager**: the model's own training step;
- **the deployed peers**, each through its own mechanism (:func:`remat_core.run.peers.measure_peer`): Hugging
  Face's checkpointing at every n-th layer, torchtitan's op policy, PyTorch's auto-SAC at three budgets, and
  (``--compile``, minutes per model on a CPU) torch.compile's partitioner at those budgets;
- **ours**: the default solver of ``via="sac"`` (the SAC planner) and of ``via="plan"``
  (:func:`remat_core.run.train_step`), at each peer's measured peak and at ``--budgets`` budgets from the
  smallest budget any of them reached to the eager peak.

Every row has its simulated peak and its measured one (bytes above the weights and inputs, by the one meter),
the measured step time over the eager step measured in the same call (the fastest of ``--timing-runs``; the
ratio is what the tables compare, so that a busy machine slows both alike), our predicted step time, and the
seconds planning took. Rows go to docs/figures/deployed.json after every model; the tables go to
docs/deployed.md between its markers, and the figure (measured time against measured memory) to
docs/figures/deployed.png. The bench runs on this CPU (the traced models live there); the CUDA columns wait for
a GPU run.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from remat_core import InfeasibleBudget, RematError, checkpoint_all_peak, solve
from remat_core.frontends import trace_zoo_model
from remat_core.run import get_route, train_step
from remat_core.run.peers import measure_peer
from remat_core.schedule import checkpoint_all_cost

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "figures" / "deployed.json"
FIGURE = ROOT / "docs" / "figures" / "deployed.png"
DOCUMENT = ROOT / "docs" / "deployed.md"
TABLE_START, TABLE_END = "<!-- deployed tables -->", "<!-- end of deployed tables -->"

MODELS = {
    "hf-llama": {"batch_size": 2, "seq_len": 128, "layers": 4, "hidden": 256, "heads": 4, "kv_heads": 2},
    "hf-gpt2": {"batch_size": 2, "seq_len": 128, "layers": 4, "hidden": 256, "heads": 4},
    "hf-bert": {"batch_size": 2, "seq_len": 128, "layers": 4, "hidden": 256, "heads": 4},
    "hf-vit": {"batch_size": 4, "image_size": 64, "layers": 4, "hidden": 256, "heads": 4},
    "hf-t5": {"batch_size": 2, "seq_len": 128, "layers": 2, "hidden": 256, "heads": 4},
    "gpt2": {"batch_size": 2, "seq_len": 128, "depth": 4},
    "resnet18": {"batch_size": 4, "image_size": 64},
    "mobilenet_v2": {"batch_size": 4, "image_size": 64},
}
"""Sizes at which a CPU step takes a fraction of a second: the whole bench runs in about half an hour on two cores."""

PEER_SHARES = (0.35, 0.6, 0.85)
"""Where the peers that follow a budget (auto-SAC, the partitioner) are asked: these shares of the way from the
weights and inputs to the checkpoint-all peak."""
PLAN_BUDGETS = 3
"""Budgets the ``plan`` route is measured at (its default solver searches: seconds per budget)."""
TIME_LIMIT = 10.0
"""Seconds a searching solver may take per budget."""


def measure_model(name: str, options: dict[str, int], budgets: int, timing_runs: int,
                  with_compile: bool) -> dict[str, Any]:
    started = time.perf_counter()
    graph = trace_zoo_model(name, cost="measured", **options)
    traced = time.perf_counter() - started
    pinned, top = graph.pinned_bytes, checkpoint_all_peak(graph)
    rows: list[dict[str, Any]] = []
    print(f"{name}: traced in {traced:.1f} s, {len(graph)} nodes", flush=True)

    def record(row: dict[str, Any]) -> None:
        rows.append(row)
        shown = {k: row.get(k) for k in ("what", "budget", "measured_peak", "simulated_peak", "time_ratio",
                                         "predicted_ratio", "planning_seconds", "error")}
        print(f"  {json.dumps(shown)}", flush=True)

    def peer(label: str, solver: str, budget: int, **solver_options: Any) -> None:
        try:
            planning = time.perf_counter()
            schedule = solve(graph, budget, solver, time_limit=TIME_LIMIT, **solver_options)
            planning = time.perf_counter() - planning
            run = measure_peer(graph, schedule, timing_runs=timing_runs)
        except (RematError, InfeasibleBudget) as refusal:
            record({"what": label, "kind": "peer", "solver": solver, "budget": budget, "error": str(refusal)})
            return
        record({"what": label, "kind": "peer", "solver": solver, "budget": budget,
                "measured_peak": run.measured_peak, "simulated_peak": run.simulated_peak,
                "eager_peak": run.eager_peak, "step_seconds": run.step_seconds,
                "eager_step_seconds": run.eager_step_seconds, "time_ratio": run.step_seconds / run.eager_step_seconds,
                "simulated_overhead": schedule.simulation.cost / checkpoint_all_cost(graph) - 1,
                "gradients_equal": run.gradients_equal, "planning_seconds": planning, "mechanism": run.mechanism})

    def ours(via: str, budget: int, why: str) -> None:
        route = get_route(via)
        solver = route.default_solver(graph)
        try:
            planning = time.perf_counter()
            schedule = route.plan(graph, budget, lambda asked: solve(graph, asked, solver,
                                                                     time_limit=TIME_LIMIT)).schedule
            planning = time.perf_counter() - planning
            report = train_step(graph, schedule, via, timing_runs=timing_runs)
        except (RematError, InfeasibleBudget) as refusal:
            record({"what": f"ours via {via}", "kind": "ours", "via": via, "solver": solver, "budget": budget,
                    "at": why, "error": str(refusal)})
            return
        record({"what": f"ours via {via}", "kind": "ours", "via": via, "solver": solver, "budget": budget, "at": why,
                "measured_peak": report.measured_peak, "simulated_peak": report.simulated_peak,
                "eager_peak": report.eager_peak, "step_seconds": report.step_seconds,
                "eager_step_seconds": report.eager_step_seconds,
                "time_ratio": report.step_seconds / report.eager_step_seconds,
                "predicted_ratio": report.predicted_step_seconds / report.eager_step_seconds,
                "simulated_overhead": report.predicted_overhead, "gradients_equal": report.gradients_equal,
                "planning_seconds": planning})

    layers = _layers(graph)
    for every in range(1, max(layers, 1) + 1):
        peer(f"hf-checkpointing every {every}", "hf-checkpointing", top, every=every)
    peer("torchtitan-sac", "torchtitan-sac", top)
    shares = [pinned + int((top - pinned) * share) for share in PEER_SHARES]
    for budget in shares:
        peer("torch-auto-sac", "torch-auto-sac", budget)
    if with_compile:
        for budget in shares:
            peer("torch-partitioner", "torch-partitioner", budget)
    eager = max((r["eager_peak"] for r in rows if "eager_peak" in r), default=top - pinned)
    points = [r for r in rows if "measured_peak" in r]
    for row in points:
        ours("sac", row["measured_peak"] + pinned, f"the peak of {row['what']}")
    smallest = min([r["measured_peak"] for r in points] + [eager])
    grid = [pinned + smallest + (eager - smallest) * k // (budgets - 1) for k in range(budgets)]
    for budget in grid:
        ours("sac", budget, "the grid")
    for budget in grid[:: max(1, (len(grid) - 1) // (PLAN_BUDGETS - 1))][:PLAN_BUDGETS]:
        ours("plan", budget, "the grid")
    return {"model": name, "options": options, "nodes": len(graph), "trace_seconds": traced, "pinned": pinned,
            "checkpoint_all_peak": top - pinned, "eager_peak": eager, "layers": layers, "rows": rows}


def _layers(graph) -> int:
    """The model's repeated blocks (what HF's ``every_n_layers`` counts)."""
    return len(graph.attachments.joint.blocks) if graph.attachments.executable else 0


# -- the document ---------------------------------------------------------------------------------------

def _mib(n: float | None) -> str:
    return "—" if n is None else f"{n / 2**20:.1f}"


def table(result: dict[str, Any]) -> list[str]:
    """One model's rows as a Markdown table."""
    lines = [f"### {result['model']} ({', '.join(f'{k}={v}' for k, v in result['options'].items())})", "",
             f"{result['nodes']} nodes, traced in {result['trace_seconds']:.1f} s; eager step holds "
             f"{_mib(result['eager_peak'])} MiB above the weights and inputs.", "",
             "| what | at | budget MiB | simulated MiB | measured MiB | step / eager | predicted | grads equal | "
             "planning s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['what']} | {r.get('at', '')} | {_mib(r['budget'] - result['pinned'])} | — | — | — | "
                         f"— | — | not run: {r['error'][:120].replace('|', '/')} |")
            continue
        predicted = f"{r['predicted_ratio']:.2f}" if "predicted_ratio" in r else "—"
        lines.append(f"| {r['what']} | {r.get('at', '')} | {_mib(r['budget'] - result['pinned'])} | "
                     f"{_mib(r['simulated_peak'])} | {_mib(r['measured_peak'])} | {r['time_ratio']:.2f} | {predicted} | "
                     f"{'yes' if r['gradients_equal'] else 'no'} | {r['planning_seconds']:.2f} |")
    return lines + [""]


def figures(results: list[dict[str, Any]]) -> list[str]:
    """The issue's figures, read off the rows: memory fidelity of the peers, time fidelity of our routes, and our
    SAC plan at each peer's measured peak."""
    lines = ["| model | peers' memory fidelity (measured / simulated) | our time fidelity (measured / predicted) | "
             "ours at each peer's peak: peak, time (of the peer's) |", "|---|---|---|---|"]
    for result in results:
        rows = [r for r in result["rows"] if "error" not in r]
        peers = [r for r in rows if r["kind"] == "peer"]
        memory = [r["measured_peak"] / r["simulated_peak"] for r in peers if r["simulated_peak"]]
        time_fidelity = [r["time_ratio"] / r["predicted_ratio"] for r in rows if "predicted_ratio" in r]
        faced = []
        for p in peers:
            mine = next((r for r in rows if r["kind"] == "ours" and r["at"] == f"the peak of {p['what']}"
                         and r["budget"] == p["measured_peak"] + result["pinned"]), None)
            if mine is not None:
                faced.append(f"{p['what']}: {mine['measured_peak'] / p['measured_peak']:.2f}, "
                             f"{mine['time_ratio'] / p['time_ratio']:.2f}")
        lines.append(f"| {result['model']} | {_span(memory)} | {_span(time_fidelity)} | {'; '.join(faced) or '—'} |")
    return lines + [""]


def _span(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}" if values else "—"


def write_document(results: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    body = [TABLE_START, "",
            f"Measured {meta['date']} on {meta['device']} ({meta['machine']}), torch {meta['torch']}, "
            f"{meta['threads']} threads, the fastest of {meta['timing_runs']} timed runs.", "",
            "## The figures", "", *figures(results), "## Every row", ""]
    for result in results:
        body += table(result)
    body.append(TABLE_END)
    text = DOCUMENT.read_text() if DOCUMENT.exists() else ""
    if TABLE_START in text and TABLE_END in text:
        head, rest = text.split(TABLE_START, 1)
        text = head + "\n".join(body) + rest.split(TABLE_END, 1)[1]
    else:
        text = text + "\n".join(body) + "\n"
    DOCUMENT.write_text(text)


def draw(results: list[dict[str, Any]]) -> None:
    """Measured step time (of eager) against measured peak (of eager), one panel per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 4
    rows_of_panels = (len(results) + columns - 1) // columns
    figure, axes = plt.subplots(rows_of_panels, columns, figsize=(4 * columns, 3.4 * rows_of_panels), squeeze=False)
    styles = {"hf-checkpointing": ("tab:orange", "s"), "torchtitan-sac": ("tab:green", "D"),
              "torch-auto-sac": ("tab:purple", "^"), "torch-partitioner": ("tab:brown", "v"),
              "sac": ("tab:blue", "o"), "plan": ("tab:cyan", "x")}
    for axis, result in zip(axes.flat, results):
        eager = result["eager_peak"] or 1
        for key, (colour, marker) in styles.items():
            points = sorted((r["measured_peak"] / eager, r["time_ratio"]) for r in result["rows"]
                            if "error" not in r and (r.get("via") == key or r.get("solver") == key and r["kind"] == "peer"))
            if points:
                xs, ys = zip(*points)
                axis.plot(xs, ys, marker=marker, color=colour, linestyle="-" if key in ("sac", "plan") else "none",
                          label=f"ours via {key}" if key in ("sac", "plan") else key)
        axis.set_title(result["model"])
        axis.set_xlabel("measured peak, of eager")
        axis.set_ylabel("step time, of eager")
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(results):]:
        axis.axis("off")
    axes.flat[0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(FIGURE, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--budgets", type=int, default=5)
    parser.add_argument("--timing-runs", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="also torch.compile's partitioner (minutes a model)")
    args = parser.parse_args()
    if args.budgets < 2:
        parser.error("--budgets needs at least 2 (the smallest reached and eager's)")
    names = args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"no sizes for {', '.join(unknown)}; the bench's models: {', '.join(MODELS)}")
    kept = json.loads(OUT.read_text()) if OUT.exists() else {"results": []}
    results = {r["model"]: r for r in kept["results"]}
    meta = {"date": time.strftime("%Y-%m-%d"), "device": "cpu", "machine": platform.processor() or
            platform.machine(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "timing_runs": args.timing_runs}
    for name in names:
        results[name] = measure_model(name, MODELS[name], args.budgets, args.timing_runs, args.compile)
        ordered = [results[n] for n in MODELS if n in results]
        OUT.write_text(json.dumps({"meta": meta, "results": ordered}, indent=1))
        write_document(ordered, meta)
        draw(ordered)


if __name__ == "__main__":
    main()
