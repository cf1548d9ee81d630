"""Run as a script: each zoo model's eager training step measured by both meters, one JSON line per model.

The profiler meter (:func:`remat_core.run.measure.peak_of`) and the counting allocator
(:mod:`remat_core.run.counting_allocator`) measure the same step; ``tests/test_meter.py`` runs this in a
process of its own, because the counting allocator stays installed for the rest of the process.

Usage: python tests/meter_check.py MODEL[:OPTION=VALUE,...] ...
"""

import json
import sys

import torch

from remat_core.run import counting_allocator
from remat_core.run.measure import peak_of


def main(specs: list[str]) -> None:
    counting_allocator.install()  # before any model is built: every later allocation is counted
    from remat_core.frontends.zoo import build_model

    torch.set_num_threads(1)
    for spec in specs:
        name, _, rest = spec.partition(":")
        options = {k: int(v) for k, v in (item.split("=") for item in rest.split(",") if item)}
        built = build_model(name, **options)

        def step():
            """A training loop's step: the outputs and the loss held until the backward ends, gradients kept."""
            output = built.forward()
            loss = built.loss.fn(output, *built.loss.targets)
            loss.backward()
            return output, loss

        step()  # warm-up: kernels fill their caches
        for p in built.module.parameters():
            p.grad = None
        with counting_allocator.counting() as count:
            profiled, _ = peak_of(step, torch.device("cpu"))
        for p in built.module.parameters():
            p.grad = None
        print(json.dumps({"model": spec, "profiler": profiled, "counting": count.peak}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
