"""Wall time of a sweep on each backend, and of the same sweep read back from the results store.

A 40-budget sweep x 4 solvers on ResNet-50 (op level, traced as ``trace resnet50`` does) runs on
``local --workers 1`` (this process), ``local --workers 2`` (a process pool), ``ray --workers 2``
(a local Ray started for the run; its start-up is included), each with a fresh store, and then once
more from the last store. It also times one solve against the same solve read back (the repeated
``solve``). Results must be equal on every backend; the script fails otherwise. Writes
``docs/store-and-ray.md``'s table to standard output (and to the file with ``--write``).

    python bench/store_ray.py [--points 40] [--solvers rotor,griewank,pathwidth,treewidth] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from remat_core import ComputeGraph
from remat_core.analysis import sweep_budgets
from remat_core.batch import Cell, open_backend, run_grid
from remat_core.frontends import trace_zoo_model
from remat_core.schedule import checkpoint_all_peak
from remat_core.store import ResultStore, stored_solve

DOC = Path(__file__).resolve().parents[1] / "docs" / "store-and-ray.md"
BACKENDS = (("local", 1), ("local", 2), ("ray", 2))


def figures(outcomes):
    return sorted((c.solver, c.budget, o.status, o.stats.get("peak"), o.stats.get("cost")) for c, o in outcomes.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--solvers", default="rotor,griewank,pathwidth,treewidth")
    parser.add_argument("--write", action="store_true", help=f"replace the table in {DOC}")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    graph = trace_zoo_model("resnet50", level="op")
    trace_seconds = time.perf_counter() - started
    solvers = args.solvers.split(",")
    cells = [Cell(graph.content_hash, s, b) for s in solvers for b in sweep_budgets(graph, args.points)]
    graphs = {graph.content_hash: graph}
    lines = []
    with tempfile.TemporaryDirectory() as folder:
        reference = None
        store = None
        for name, workers in BACKENDS:
            store = ResultStore(Path(folder) / f"{name}-{workers}.sqlite")
            started = time.perf_counter()
            outcomes = run_grid(graphs, cells, open_backend(name, workers), store)
            seconds = time.perf_counter() - started
            if reference is None:
                reference = figures(outcomes)
            assert figures(outcomes) == reference, f"{name} x{workers} differs from local x1"
            lines.append((f"`{name} --workers {workers}`", seconds, len(cells) / seconds))
        started = time.perf_counter()
        outcomes = run_grid(graphs, cells, open_backend("local", 1), store)
        seconds = time.perf_counter() - started
        assert figures(outcomes) == reference and all(o.from_store for o in outcomes.values())
        lines.append(("again, from the store (each schedule simulated again)", seconds, len(cells) / seconds))

        # One solve and its repeat, each on the graph as a new process has it (read from its document: no
        # chains, tables or decompositions cached on it by the sweeps above).
        budget = int(checkpoint_all_peak(graph) * 0.5)
        single = ResultStore(Path(folder) / "single.sqlite")
        document = graph.to_json()
        repeats = []
        for solver in solvers:
            times = []
            for _ in range(2):
                fresh = ComputeGraph.from_json(document)
                started = time.perf_counter()
                outcome = stored_solve(fresh, budget, solver, store=single)
                times.append(time.perf_counter() - started)
            repeats.append((solver, *times, outcome.from_store))

    table = [f"ResNet-50 at op level ({len(graph)} nodes, traced in {trace_seconds:.1f} s), {len(cells)} solves "
             f"({args.points} budgets x {', '.join(solvers)}); {os.cpu_count()} CPUs, load average "
             f"{load_before:.1f} before and {os.getloadavg()[0]:.1f} after, Python {platform.python_version()}.", "",
             "| run | wall time (s) | solves/s |", "|---|---:|---:|"]
    table += [f"| {run} | {seconds:.2f} | {rate:.1f} |" for run, seconds, rate in lines]
    table += ["", "One solve at 50 % of the checkpoint-all peak, then the same solve again (read back from the "
                  "store, simulated again), each on the graph rebuilt from its document as a new process has it "
                  "(the key's content hash included):", "",
              "| solver | first solve (ms) | repeated (ms) | repeated / first |", "|---|---:|---:|---:|"]
    table += [f"| {s} | {a * 1e3:.1f} | {b * 1e3:.1f} | {b / a:.2f} |" for s, a, b, hit in repeats if hit]
    text = "\n".join(table)
    print(text)
    if args.write:
        doc = DOC.read_text()
        begin, end = "<!-- bench/store_ray.py -->", "<!-- end bench/store_ray.py -->"
        head, rest = doc.split(begin)
        DOC.write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end)[1]}")


if __name__ == "__main__":
    main()
