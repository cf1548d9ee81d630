"""The budgets the explorer accepts: the slider's scale (one unit, a range around the lower bound and the
checkpoint-all peak, a round step) and budget text checked against that range.

Every budget that enters the app (the slider, the exact-budget box, the URL) lands in the same range,
so that what the slider shows is the session's budget, and every budget is exact in bytes: a slider
position reads as the same bytes as its text (:func:`remat_core.graph.budget_text`) in the URL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

from remat_core import BudgetError, ComputeGraph, parse_budget
from remat_core.analysis import graph_summary
from remat_core.graph import budget_text, format_bytes
from remat_core.viz import ByteUnit, unit_for

SLIDER_STEPS = 200


@dataclass(frozen=True)
class BudgetScale:
    """How the budget slider maps to bytes: one unit, a range around the two marks, a round step."""

    unit: ByteUnit
    low: float
    high: float
    step: float
    lower_bound: int
    peak: int

    @property
    def decimals(self) -> int:
        return max(0, -math.floor(math.log10(self.step)))

    @property
    def format(self) -> str:
        return f"%.{self.decimals}f {self.unit.name}"

    def to_bytes(self, value: float) -> int:
        """The bytes of slider position ``value``: its text at the slider's precision, read as
        :func:`~remat_core.parse_budget` reads it (so that the URL's text gives the same bytes)."""
        exact = Decimal(f"{value:.{self.decimals}f}") * self.unit.size
        return int(exact.to_integral_value(rounding=ROUND_FLOOR))

    def to_units(self, nbytes: int) -> float:
        """The slider position showing ``nbytes``: the first step at or above it, within the range."""
        steps = round((nbytes / self.unit.size - self.low) / self.step)
        if self.to_bytes(self.low + steps * self.step) < nbytes:  # compared in bytes: floats blur a few
            steps += 1
        return round(min(max(self.low + steps * self.step, self.low), self.high), self.decimals)

    @property
    def smallest(self) -> int:
        """The smallest budget accepted: the slider's left end, in bytes."""
        return self.to_bytes(self.low)

    @property
    def largest(self) -> int:
        """The largest budget accepted: the slider's right end, in bytes."""
        return self.to_bytes(self.high)

    def snap(self, nbytes: int) -> int:
        """The budget the slider can show for ``nbytes``: its first step at or above (within the range), in bytes.

        Every budget the session takes is snapped, so that the thumb, the URL and the sidebar show one value.
        """
        return self.to_bytes(self.to_units(nbytes))

    def text(self, nbytes: int) -> str:
        """``nbytes`` as the URL writes it: a slider position at the slider's precision (``0.545GiB``, the digits its
        thumb shows), else the shortest text in its unit that reads back exactly (``52.53125MiB``)."""
        value = self.to_units(nbytes)
        if self.to_bytes(value) == nbytes:
            return f"{value:.{self.decimals}f}{self.unit.name}"
        return budget_text(nbytes, self.unit.name)

    def label(self, nbytes: int) -> str:
        """``nbytes`` as the page shows it: the URL's text with a space before the unit (``0.545 GiB``)."""
        text = self.text(nbytes)
        return f"{text[: -len(self.unit.name)]} {self.unit.name}"


def _nice_step(raw: float) -> float:
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def budget_scale(lower_bound: int, peak: int) -> BudgetScale:
    """A slider from a little under the lower bound to a little over the checkpoint-all peak."""
    span = max(peak - lower_bound, peak * 0.1, 1)
    unit = unit_for(peak)
    step = float(_nice_step(span / unit.size / SLIDER_STEPS))
    low = max(0.0, math.floor((lower_bound - 0.04 * span) / unit.size / step) * step)
    high = math.ceil((peak + 0.06 * span) / unit.size / step) * step
    return BudgetScale(unit, float(round(low, 12)), float(round(high, 12)), step, lower_bound, peak)


def scale_of(graph: ComputeGraph) -> BudgetScale:
    """The budget scale of ``graph`` (its lower bound and checkpoint-all peak)."""
    summary = graph_summary(graph)
    return budget_scale(summary.lower_bound, summary.checkpoint_all_peak)


def checked_budget(text: str, graph: ComputeGraph) -> int:
    """Budget ``text`` (bytes, a unit, or a percent of the checkpoint-all peak) in bytes, within the slider's range.

    Raises
    ------
    BudgetError
        For text :func:`remat_core.parse_budget` cannot read, or a budget outside the range, saying the range
        and why it ends where it does.
    """
    scale = scale_of(graph)
    try:
        nbytes = parse_budget(text, scale.peak)
    except BudgetError as e:
        raise BudgetError(f"{e}. This model's budgets go from {format_bytes(scale.smallest)} to "
                          f"{format_bytes(scale.largest)}") from None
    if not scale.smallest <= nbytes <= scale.largest:
        raise BudgetError(
            f"budget {text.strip()!r} ({format_bytes(nbytes)}) is outside the range this model's budgets take, "
            f"{format_bytes(scale.smallest)} to {format_bytes(scale.largest)}: no schedule fits under the lower "
            f"bound ({format_bytes(scale.lower_bound)}) and none recomputes anything from the checkpoint-all peak "
            f"({format_bytes(scale.peak)}) on")
    return nbytes
