"""How fast does the tracer run, and how big are the graphs? Every zoo model at its default batch.

For each model: the op-level trace time (FakeTensor capture + graph build, flops costs; building
the model's real weights is not counted), op-level nodes and edges, the module-level coarsening
time and node count, and the checkpoint-all peak at both levels. ResNet-50 is also traced at batch
64, the size the issue's speed goal names. Prints a table; writes nothing.

Run: .venv/bin/python bench/trace.py [--models resnet50 gpt2 ...] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from remat_core.frontends import build_model, coarsen_by_module, list_models, trace_training_graph
from remat_core.graph import format_bytes
from remat_core.schedule import checkpoint_all_peak

EXTRA_RUNS = (("resnet50", 64),)


def _row(name: str, batch: int | None, repeats: int) -> str:
    built = build_model(name, batch)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        graph = trace_training_graph(built.module, built.example_inputs, built.loss, name=name)
        times.append(time.perf_counter() - started)
    started = time.perf_counter()
    coarse = coarsen_by_module(graph)
    coarsen_s = time.perf_counter() - started
    kinds = [n.kind for n in graph.nodes]
    return (f"{name:<13} {built.options['batch_size']:>5} {statistics.median(times):>8.2f} {len(graph):>7} "
            f"{len(graph.edges):>7} {kinds.count('forward') + kinds.count('loss'):>6} {kinds.count('backward'):>6} "
            f"{coarsen_s * 1e3:>9.1f} {len(coarse):>7} {format_bytes(checkpoint_all_peak(graph)):>11} "
            f"{format_bytes(checkpoint_all_peak(coarse)):>11} {format_bytes(graph.pinned_bytes):>10}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list_models(), help="zoo models (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="traces per model; the median time is shown")
    args = parser.parse_args()
    print(f"{'model':<13} {'batch':>5} {'trace s':>8} {'op n':>7} {'op e':>7} {'fwd':>6} {'bwd':>6} "
          f"{'coarsen ms':>9} {'mod n':>7} {'peak op':>11} {'peak mod':>11} {'pinned':>10}")
    runs = [(m, None) for m in args.models] + [r for r in EXTRA_RUNS if r[0] in args.models]
    for name, batch in runs:
        print(_row(name, batch, args.repeats), flush=True)


if __name__ == "__main__":
    main()
