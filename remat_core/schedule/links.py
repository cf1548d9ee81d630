"""Transfer lanes as users name them: a bandwidth per unit of the graph's cost, a rate per second, or a device preset.

The simulator times copies in the graph's own cost units (:class:`~.simulator.Link`). A rate per
second becomes bytes per cost unit through the *compute rate*, the cost units the device runs per
second: with FLOP costs (the tracer's default) that is the device's FLOP/s, with measured costs 1.

Presets (bytes per second each way, to the host / to the device; sources in ``docs/offloading.md``):

- ``pcie3``: 12 GB/s both ways, what POFO measured between a V100 and its host (Beaumont et al., 2021).
- ``pcie4``: 31.5 GB/s both ways, the PCIe 4.0 x16 line rate (16 GT/s x 16 lanes, 128b/130b), an
  upper bound: measured copies reach less.
- ``pcie5``: 55.6 GB/s both ways, a measured PCIe 5.0 x16 host-to-device copy (NVbandwidth's
  ``host_to_device_memcpy_ce``).
- ``nvlink-c2c``: 297 GB/s to the host, 375 GB/s to the device, measured on a GH200 (Schieffer et
  al., 2024); NVIDIA's figure is 450 GB/s each way.
"""

from __future__ import annotations

import math
import re

from ..graph.budget import parse_budget
from .schedule import Schedule
from .simulator import Link

LINK_PRESETS: dict[str, tuple[float, float]] = {
    "pcie3": (12e9, 12e9),
    "pcie4": (31.5e9, 31.5e9),
    "pcie5": (55.6e9, 55.6e9),
    "nvlink-c2c": (297e9, 375e9),
}
"""Bytes per second to the host and to the device of each preset (see the module notes)."""

DEFAULT_COMPUTE_RATE = 14e12
"""Cost units per second a rate is converted with unless told otherwise: 14 TFLOP/s, a V100's fp32 rate, for the
tracer's FLOP costs (POFO's setting)."""

_RATE = re.compile(r"^\s*(.+?)\s*/\s*s\s*$", re.IGNORECASE)


def parse_link(bandwidth: str, latency: float = 0.0, full_duplex: bool = True,
               compute_rate: float = DEFAULT_COMPUTE_RATE) -> Link:
    """The :class:`Link` a ``--bandwidth`` text names.

    Parameters
    ----------
    bandwidth : str
        A preset (:data:`LINK_PRESETS`), or one or two values (to the host, to the device) separated by
        a comma, each bytes per cost unit (``4096``, ``1MiB``) or per second (``12GB/s``).
    latency : float
        Cost units every copy takes besides its bytes.
    full_duplex : bool
        One lane each way (False: one lane for both).
    compute_rate : float
        Cost units per second, for rates and presets.

    Raises
    ------
    ValueError
        Saying what was wrong and what is accepted.
    """
    text = str(bandwidth).strip()
    if not compute_rate > 0:
        raise ValueError(f"the compute rate must be a positive number of cost units per second, got {compute_rate!r}")
    if text.lower() in LINK_PRESETS:
        to_host, to_device = LINK_PRESETS[text.lower()]
        return Link(to_host / compute_rate, to_device / compute_rate, latency, full_duplex)
    parts = [p.strip() for p in text.split(",")]
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ValueError(_expected(text, "not one or two values"))
    rates = [_rate(part, text, compute_rate) for part in parts]
    return Link(rates[0], rates[-1], latency, full_duplex)


def schedule_link(schedule: Schedule) -> Link | None:
    """The link a schedule with transfers was solved for (``solver_info["link"]``), or, without one recorded, copies
    that take no time (the order of its ops still checked); None for a schedule without transfers."""
    if not schedule.has_transfers:
        return None
    recorded = schedule.solver_info.get("link")
    return Link.from_description(recorded) if isinstance(recorded, dict) else Link(math.inf, math.inf)


def _rate(part: str, whole: str, compute_rate: float) -> float:
    """Bytes per cost unit of one value (per second when it ends in ``/s``)."""
    per_second = _RATE.match(part)
    value = per_second.group(1) if per_second else part
    try:
        number = float(value) if re.fullmatch(r"\d+(\.\d*)?([eE][+-]?\d+)?", value) else float(parse_budget(value))
    except Exception:  # noqa: BLE001 - parse_budget's BudgetError, or a float that does not parse
        raise ValueError(_expected(whole, f"cannot read {part!r}")) from None
    if not number > 0:
        raise ValueError(_expected(whole, f"{part!r} is not a positive bandwidth"))
    return number / compute_rate if per_second else number


def _expected(text: str, why: str) -> str:
    return (f"bandwidth {text!r}: {why}; give a preset ({', '.join(LINK_PRESETS)}), or bytes per cost unit (4096, "
            f"1MiB) or per second (12GB/s), optionally two separated by a comma: to the host, to the device")
