"""The cost models a traced or imported graph can carry, and the one constant they share.

Torch-free, so that importers which need no PyTorch (ONNX) and the CLI can use them.

- ``flops`` (default): floating-point operations of ops with a FLOP formula (matmuls, convolutions,
  attention and their backwards); memory-bound ops without one get their memory traffic (bytes read
  plus written) times :data:`FLOPS_PER_BYTE`.
- ``unit``: every computed node costs 1 (recomputation counts ops).
- ``bytes``: memory traffic of every op, bytes read plus written.
- ``measured``: seconds, the median of a few timed runs of each op on real CPU tensors (traced
  PyTorch models only).
"""

COST_MODELS = ("flops", "unit", "bytes", "measured")

FLOPS_PER_BYTE = 16.0
"""FLOP-equivalents per byte of memory traffic, for ops without a FLOP formula.

It is the machine balance of typical fp32 training hardware, peak arithmetic rate over memory
bandwidth: about 17 on a V100 (15.7 TFLOP/s, 900 GB/s), 12.6 on an A100 (19.5 TFLOP/s, 1.55 TB/s),
10 to 20 on a server CPU. At that ratio a memory-bound op that moves B bytes takes as long as a
compute-bound op of 16 B FLOPs, so the two kinds of cost add up on one scale."""

DEFAULT_REPEATS = 3
"""Timed runs per op for ``measured`` costs (after one warm-up run); the median is kept."""
