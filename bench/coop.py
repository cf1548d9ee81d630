"""Does Coop's "up to 2x memory saving" hold, against DTR on the same slab and against our static solvers?

Every solver here is given a memory of one size and must fit in it *at addresses*, as a device does:

- ``coop``, ``dtr-slab``, ``dte-slab`` run in a slab of the budget's size (``remat_core.solvers.eviction.slab``);
- ``dtr`` (counting bytes) and the static solvers (``rotor``, ``lifetime-split``, ``checkmate-lp``) are solved
  at byte budgets; their schedule's tensors are then placed best fit, in order, in an unbounded slab
  (``placed_extent``): the slab that schedule needs.

For each graph (zoo models traced at op level at small sizes, and the published Checkmate training graphs in
``../shared/graphs/checkmate`` when present), budgets on a grid from the lower bound to 110% of the checkpoint-all
peak P; per solver, the smallest slab it fits in (x P), its compute overhead there, and for the slab solvers
Coop's fragmentation metric there. Writes ``docs/coop.md``.

Run: PYTHONPATH=$PWD .venv/bin/python bench/coop.py [--no-write] [--points 14]
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np

from remat_core import checkpoint_all_peak, load_graph, memory_lower_bound, solve_outcome
from remat_core.frontends.trace import trace_zoo_model
from remat_core.solvers.eviction.slab import placed_extent

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "coop.md"
CHECKMATE = ROOT.parent / "shared" / "graphs" / "checkmate"
ZOO = {"resnet18": {"batch_size": 8, "image_size": 112}, "mobilenet_v2": {"batch_size": 8, "image_size": 112},
       "unet": {"batch_size": 2, "image_size": 96}, "transformer": {"batch_size": 8, "seq_len": 128, "depth": 2}}
SLAB_SOLVERS = ("coop", "dtr-slab", "dte-slab")
BYTE_SOLVERS = ("dtr", "rotor", "lifetime-split", "checkmate-lp")
TIME_LIMIT = 20.0
NOTES = "## Reading the numbers"
"""The heading of the notes written by hand below the table: a new run keeps them."""


def graphs():
    for name, options in ZOO.items():
        options = dict(options)
        yield trace_zoo_model(name, options.pop("batch_size"), **options)
    for path in sorted(CHECKMATE.glob("*_train_nx.json")) if CHECKMATE.exists() else []:
        yield load_graph(path)


def measure(graph, points: int) -> list[dict]:
    peak, low = checkpoint_all_peak(graph), memory_lower_bound(graph)
    budgets = sorted({int(b) for b in np.linspace(low, 1.1 * peak, points)})
    rows = []
    for solver in SLAB_SOLVERS + BYTE_SOLVERS:
        best = None
        for budget in budgets:
            outcome = solve_outcome(graph, budget, solver, TIME_LIMIT)
            if not outcome.feasible:
                continue
            schedule = outcome.schedule
            slab = budget if solver in SLAB_SOLVERS else placed_extent(graph, schedule)
            if best is None or slab < best["slab"]:
                best = {"slab": slab, "overhead": schedule.stats["overhead"],
                        "fragmentation": schedule.solver_info.get("fragmentation")}
        rows.append({"graph": graph.name, "solver": solver, "peak": peak, **(best or {})})
        print(rows[-1], flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| graph | solver | smallest slab (x checkpoint-all peak) | overhead there | fragmentation there |",
             "|---|---|---|---|---|"]
    for r in rows:
        if "slab" not in r:
            lines.append(f"| {r['graph']} | {r['solver']} | none on the grid | - | - |")
            continue
        frag = f"{r['fragmentation']:.1%}" if r.get("fragmentation") is not None else "-"
        lines.append(f"| {r['graph']} | {r['solver']} | {r['slab'] / r['peak']:.3f} | {r['overhead']:+.1%} | "
                     f"{frag} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=14, help="budgets on the grid")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    rows = [row for graph in graphs() for row in measure(graph, args.points)]
    text = table(rows)
    print(text)
    if not args.no_write:
        kept = TABLE.read_text().partition(NOTES)[2] if TABLE.exists() else ""
        TABLE.write_text(f"""# Coop against DTR and the static solvers, at addresses

Written by `bench/coop.py` on {datetime.date.today().isoformat()}. Slab solvers at a slab of the budget's size;
byte-counting solvers at byte budgets, their schedules then placed best fit in order (the slab they need).
A grid of {args.points} budgets from the lower bound to 110% of the checkpoint-all peak; {TIME_LIMIT:g} s per solve.

{text}
""" + (f"\n{NOTES}{kept}" if kept else ""))


if __name__ == "__main__":
    sys.exit(main())
