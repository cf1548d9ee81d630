"""The rows of bench/pytorch_bridge.py on a CUDA GPU: one training step per plan and route, peaks from the allocator.

Run: PYTHONPATH=$PWD .venv/bin/python bench/gpu_execute.py [--models resnet18,gpt2] [--vias plan,sac,compile]
     [--budgets 70,50,30] [--limit 300]

Without a CUDA device it says so and exits 0. With one, each zoo model is built on the GPU at
training-size batches, traced there, and measured as on the CPU, except that the peaks come from
``torch.cuda.max_memory_allocated`` (bytes above what was allocated before the step) and
``--via compile`` needs Triton instead of a C++ compiler. Results go to
docs/figures/pytorch-bridge-gpu.json and a table to docs/figures/pytorch-bridge-gpu.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pytorch_bridge import MODELS, ROOT, run, table  # noqa: E402

from remat_core.frontends import LossSetup, build_model, trace_training_graph  # noqa: E402
from remat_core.run import ROUTES  # noqa: E402

GPU_MODELS = {
    "resnet18": {"batch_size": 64, "image_size": 224},
    "resnet50": {"batch_size": 32, "image_size": 224},
    "mobilenet_v2": {"batch_size": 64, "image_size": 224},
    "gpt2": {"batch_size": 8, "seq_len": 512},
    "unet": {"batch_size": 4, "image_size": 256},
}
"""The same models at the sizes people train them at on one GPU."""


def trace_on(device: torch.device, model: str):
    """The zoo model built, moved to ``device`` with its inputs and loss targets, and traced there."""
    built = build_model(model, **GPU_MODELS[model])
    module = built.module.to(device)
    inputs = tuple(t.to(device) for t in built.example_inputs)
    loss = built.loss and LossSetup(built.loss.name, built.loss.fn, tuple(t.to(device) for t in built.loss.targets))
    return trace_training_graph(module, inputs, loss, name=f"{model} on {device}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--vias", default=",".join(ROUTES))
    parser.add_argument("--budgets", default="70,50,30")
    parser.add_argument("--timing-runs", type=int, default=3)
    parser.add_argument("--limit", type=float, default=300, help="seconds per route; over it, recorded as timed out")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_execute: no CUDA device here (torch.cuda.is_available() is False); nothing to measure. "
              "Run it on a machine with a GPU; bench/pytorch_bridge.py measures the CPU.")
        return 0
    device = torch.device("cuda")
    print(f"gpu_execute: {torch.cuda.get_device_name(device)}, torch {torch.__version__}", flush=True)
    vias = args.vias.split(",")
    rows = run(args.models.split(","), vias, [int(b) for b in args.budgets.split(",")], args.timing_runs,
               lambda model: trace_on(device, model), GPU_MODELS,
               ROOT / "docs" / "figures" / "pytorch-bridge-gpu.json", None, args.limit)
    out = ROOT / "docs" / "figures" / "pytorch-bridge-gpu.md"
    out.write_text(f"One training step on {torch.cuda.get_device_name(device)} (bench/gpu_execute.py).\n\n"
                   + table(rows, vias) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
