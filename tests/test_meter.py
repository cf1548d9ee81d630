"""One honest meter: the profiler's allocation events and a counting CPU allocator agree on every zoo model's step.

Both meters run on the same eager training step (forward, backward, the gradients allocated), in a process of
their own (``tests/meter_check.py``): the counting allocator stays installed once it is.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from remat_core.frontends.zoo import get_spec, list_models
from remat_core.run import counting_allocator

HERE = Path(__file__).resolve().parent
SMALL = {"mlp": {"batch_size": 64}, "graphsage": {"batch_size": 500}, "gcn": {"batch_size": 500},
         "gat": {"batch_size": 500}}
"""Sizes that keep a model's step small here, where the shared ones below do not."""
SHARED = {"batch_size": 2, "image_size": 64, "seq_len": 32, "depth": 1, "layers": 1}
"""Small sizes for the options a model declares: batch 2, images at 64 pixels, 32 tokens, one block."""


def small_spec(name: str) -> str:
    """The model at small sizes, as the check's ``name:option=value,...`` argument."""
    declared = get_spec(name).defaults
    options = SMALL.get(name) or {k: v for k, v in SHARED.items() if k in declared}
    return f"{name}:" + ",".join(f"{k}={v}" for k, v in options.items())


@pytest.mark.skipif(not counting_allocator.available(), reason="the counting allocator needs a C++ compiler")
def test_the_profiler_meter_and_the_counting_allocator_agree_within_1_percent_on_every_zoo_model():
    names = list(list_models())
    specs = [small_spec(name) for name in names]
    run = subprocess.run([sys.executable, str(HERE / "meter_check.py"), *specs], capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["model"] for r in rows] == specs
    for row in rows:
        assert row["profiler"] > 0 and abs(row["profiler"] - row["counting"]) <= 0.01 * row["counting"], row
