"""Offloading beside recomputation: POFO's claims, measured on the one simulator (and on a GPU when there is one).

1. The uniform chain of the issue (8 stages, forward 1, backward 2, activation 1, bandwidth 1 per time unit): the
   makespan of ``pofo`` (offload + recompute) and ``rotor`` (recompute only) at every budget from the lower bound
   to the checkpoint-all peak.
2. The zoo's resnet50, densenet121 and inception traced at batch 16, 224 px, op level, FLOP costs read as time on
   a V100 (14 TFLOP/s) and copies at 12 GB/s each way (POFO's setting, ``--bandwidth pcie3``): on a grid of
   activation budgets, each solver's makespan overhead over the compute time; the smallest activation memory
   (budget minus weights and inputs) each keeps under 20% overhead, as a factor of checkpoint-all's; and how much
   of recomputation's overhead offloading removes where both fit.
3. On a GPU (when ``torch.cuda.is_available()``): the host link's bandwidth each way (pinned buffers, alone and
   both at once), and one offloaded plan of resnet18 run via ``offload``: gradients, measured vs simulated peak,
   the copies' measured bandwidth. Not timed on a CPU (nothing moves there).

Writes ``docs/figures/offloading.json`` and the tables of ``docs/offloading.md`` (between its markers; the text
around them is kept).

Run: PYTHONPATH=$PWD .venv/bin/python bench/offload.py [--no-write] [--points 24]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

from remat_core import checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound, solve_outcome
from remat_core.frontends.trace import trace_zoo_model
from remat_core.graph import format_bytes
from remat_core.graph.generators import training_chain
from remat_core.schedule import Link
from remat_core.schedule.links import DEFAULT_COMPUTE_RATE, LINK_PRESETS, parse_link

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "offloading.md"
DATA = ROOT / "docs" / "figures" / "offloading.json"
BEGIN, END = "<!-- bench/offload.py: begin -->", "<!-- bench/offload.py: end -->"
MODELS = ("resnet50", "densenet121", "inception")
OVERHEAD = 0.20
POFO_FACTORS = (4, 6)
"""POFO's abstract: activation memory cut 4 to 6 times at under 20% overhead."""


def makespan(graph, budget: int, solver: str, link: Link) -> dict | None:
    outcome = solve_outcome(graph, budget, solver, link=link)
    if not outcome.feasible:
        return None
    stats = outcome.stats
    return {"makespan": stats["makespan"], "cost": stats["cost"], "peak": stats["peak"],
            "to_host": stats["bytes_to_host"], "compute_stall": stats["compute_stall"]}


def uniform_chain() -> dict:
    graph = training_chain(8, mem=1, cost=1.0)
    link = Link(1.0, 1.0)
    rows = []
    for budget in range(memory_lower_bound(graph), checkpoint_all_peak(graph) + 1):
        rows.append({"budget": budget, **{s: makespan(graph, budget, s, link) for s in ("rotor", "pofo")}})
    return {"graph": graph.name, "compute": checkpoint_all_cost(graph), "rows": rows}


def zoo_model(name: str, points: int) -> dict:
    graph = trace_zoo_model(name, 16, image_size=224)
    link = parse_link("pcie3")
    pinned, peak, low = graph.pinned_bytes, checkpoint_all_peak(graph), memory_lower_bound(graph)
    compute = checkpoint_all_cost(graph)
    budgets = sorted({int(b) for b in np.linspace(low, peak, points)})
    rows = []
    for budget in budgets:
        row = {"budget": budget, "activations": budget - pinned}
        for solver in ("rotor", "pofo"):
            found = makespan(graph, budget, solver, link)
            row[solver] = None if found is None else {**found, "overhead": found["makespan"] / compute - 1}
        rows.append(row)
        print(f"  {name} {format_bytes(budget)}: " + ", ".join(
            f"{s} {row[s]['overhead']:+.1%}" if row[s] else f"{s} -" for s in ("rotor", "pofo")), file=sys.stderr)

    def smallest_under(solver: str) -> int | None:
        fitting = [r["activations"] for r in rows if r[solver] and r[solver]["overhead"] <= OVERHEAD]
        return min(fitting) if fitting else None

    both = [r for r in rows if r["rotor"] and r["pofo"] and r["rotor"]["overhead"] > 1e-9]
    removed = [1 - r["pofo"]["overhead"] / r["rotor"]["overhead"] for r in both]
    activations = peak - pinned
    seconds = compute / DEFAULT_COMPUTE_RATE
    return {"model": graph.name, "nodes": len(graph), "weights_and_inputs": pinned, "activations": activations,
            "compute": compute, "rows": rows, "compute_seconds": seconds,
            "copyable_share": LINK_PRESETS["pcie3"][0] * seconds / activations,
            "smallest_under": {s: smallest_under(s) for s in ("rotor", "pofo")},
            "factor": {s: (activations / smallest_under(s) if smallest_under(s) else None) for s in ("rotor", "pofo")},
            "overhead_removed": {"median": float(np.median(removed)) if removed else None, "budgets": len(removed)}}


def gpu() -> dict | None:
    import torch

    if not torch.cuda.is_available():
        return None
    from remat_core import solve
    from remat_core.run import train_step

    device = torch.device("cuda")
    size = 256 * 2 ** 20
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(size, dtype=torch.uint8, device=device)
    streams = torch.cuda.Stream(), torch.cuda.Stream()

    def timed(copies) -> float:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for stream, (dst, src) in zip(streams, copies):
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                dst.copy_(src, non_blocking=True)
            torch.cuda.current_stream().wait_stream(stream)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3

    timed([(dev, host)])
    back = torch.empty_like(host).pin_memory()
    bandwidth = {"to_host": size / timed([(host, dev)]), "to_device": size / timed([(dev, host)]),
                 "both_at_once": 2 * size / timed([(host, dev), (dev, back)])}
    graph = trace_zoo_model("resnet18", 16, image_size=224)
    link = Link(bandwidth["to_host"] / DEFAULT_COMPUTE_RATE, bandwidth["to_device"] / DEFAULT_COMPUTE_RATE)
    peak, pinned = checkpoint_all_peak(graph), graph.pinned_bytes
    schedule = solve(graph, int(pinned + 0.5 * (peak - pinned)), "pofo", link=link)
    report = train_step(graph, schedule, "offload")
    return {"device": torch.cuda.get_device_name(), "bandwidth": bandwidth, "resnet18": report.summary(),
            "simulated_makespan_units": schedule.stats["makespan"]}


def tables(result: dict) -> str:
    chain = result["chain"]
    lines = [f"Measured {result['date']} on this machine's simulator (`bench/offload.py`).", "",
             f"**Uniform chain** ({chain['graph']}: forward 1, backward 2, activation 1, bandwidth 1; compute time "
             f"{chain['compute']:g}): makespan by budget.", "",
             "| budget | rotor (recompute only) | pofo (offload + recompute) | bytes offloaded |", "|---|---|---|---|"]
    for row in chain["rows"]:
        cells = [f"{row[s]['makespan']:g}" if row[s] else "does not fit" for s in ("rotor", "pofo")]
        moved = row["pofo"]["to_host"] if row["pofo"] else "-"
        lines.append(f"| {row['budget']} | {cells[0]} | {cells[1]} | {moved} |")
    lines += ["", f"**Zoo models** at batch 16, 224 px, op level; FLOPs at {DEFAULT_COMPUTE_RATE / 1e12:g} TFLOP/s, "
                  f"copies at {LINK_PRESETS['pcie3'][0] / 1e9:g} GB/s each way. Activation memory = budget minus "
                  f"weights and inputs; factor = checkpoint-all's activation memory over the smallest that keeps "
                  f"the makespan within {OVERHEAD:.0%} of the compute time (on a grid of budgets).", "",
              "| model | nodes | checkpoint-all activations | step's compute time | share of the activations one "
              "way of the link moves in that time | rotor: smallest within 20% (factor) | pofo: smallest within 20% "
              "(factor) | POFO's published factor | recompute overhead pofo removes (median over budgets) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for model in result["models"]:
        def cell(solver: str) -> str:
            smallest = model["smallest_under"][solver]
            return f"{format_bytes(smallest)} ({model['factor'][solver]:.2f}x)" if smallest else "none"
        removed = model["overhead_removed"]["median"]
        removed_cell = f"{removed:.0%} ({model['overhead_removed']['budgets']} budgets)" if removed is not None else "-"
        lines.append(f"| {model['model']} | {model['nodes']:,} | {format_bytes(model['activations'])} | "
                     f"{model['compute_seconds'] * 1e3:.1f} ms | {model['copyable_share']:.0%} | "
                     f"{cell('rotor')} | {cell('pofo')} | {POFO_FACTORS[0]}-{POFO_FACTORS[1]}x | {removed_cell} |")
    gpu_result = result.get("gpu")
    lines += [""]
    if gpu_result is None:
        lines.append("**GPU**: not measured: no GPU on the machine that ran this (the simulator's makespan and "
                     "device peak against a real step, and the link's bandwidth, need one).")
    else:
        b = gpu_result["bandwidth"]
        r = gpu_result["resnet18"]
        lines.append(f"**GPU** ({gpu_result['device']}): host link {b['to_host'] / 1e9:.1f} GB/s to the host, "
                     f"{b['to_device'] / 1e9:.1f} GB/s to the device, {b['both_at_once'] / 1e9:.1f} GB/s both at "
                     f"once. resnet18 via offload: gradients {'equal' if r['gradients_equal'] else 'DIFFERENT'}, "
                     f"measured peak {format_bytes(r['measured_peak'])} vs simulated "
                     f"{format_bytes(r['simulated_peak'])}, step {r['step_seconds']:.3f} s.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--points", type=int, default=24)
    args = parser.parse_args()
    result = {"date": datetime.date.today().isoformat(), "chain": uniform_chain(),
              "models": [zoo_model(name, args.points) for name in MODELS], "gpu": gpu()}
    text = tables(result)
    print(text)
    if not args.no_write:
        DATA.write_text(json.dumps(result, indent=1) + "\n")
        doc = DOC.read_text()
        start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        DOC.write_text(doc[:start] + "\n" + text + "\n" + doc[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
