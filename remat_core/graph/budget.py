"""Memory budgets as people write them: ``123456``, ``512MiB``, ``1.5GB``, ``64KiB``, ``70%``; and back."""

from __future__ import annotations

import math
import re
from decimal import ROUND_FLOOR, Decimal, InvalidOperation
from fractions import Fraction

from ..errors import BudgetError
from .compute_graph import MAX_GRAPH_BYTES

UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
         "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "PIB": 2**50}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*|%)\s*$")
_EXPECTED = ("bytes (123456), a number with a unit (512MiB, 1.5GB, 64KiB; units B, KB, MB, GB, TB, PB, KiB, MiB, "
             "GiB, TiB, PiB) or a percent of the checkpoint-all peak (70%)")
_LARGEST_EXPONENT = 40
"""Numbers written with more digits than this are refused before any arithmetic (``1e999999999``)."""


def parse_budget(text: str, checkpoint_all_peak: int | None = None) -> int:
    """Bytes from a budget written as bytes, with a unit, or as a percent of the checkpoint-all peak.

    Fractions of a byte are rounded down. A percent needs ``checkpoint_all_peak``.

    Raises
    ------
    BudgetError
        For text that is not one of those forms (a negative number, ``nan`` or ``inf`` included), a
        percent without a peak to take it of, or a budget over ``MAX_GRAPH_BYTES`` (8 PiB, more than
        any graph holds).
    """
    text = str(text)
    match = _PATTERN.match(text)
    if not match:
        if text.strip().startswith("-"):
            raise BudgetError(f"budget {text!r} is negative: a budget is a memory size, so write {_EXPECTED}")
        raise BudgetError(f"cannot read budget {text!r}: expected {_EXPECTED}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        raise BudgetError(f"cannot read budget {text!r}: expected {_EXPECTED}") from None
    unit = match.group(2)
    if unit == "%":
        if checkpoint_all_peak is None:
            raise BudgetError(f"budget {text!r} is a percent, but there is no checkpoint-all peak to take it of")
        factor, divisor = checkpoint_all_peak, 100
    else:
        factor, divisor = UNITS.get(unit.upper() if unit else "B"), 1
        if factor is None:
            raise BudgetError(f"unknown unit {unit!r} in budget {text!r}: expected {_EXPECTED}")
    if number.adjusted() > _LARGEST_EXPONENT or number * factor / divisor > MAX_GRAPH_BYTES:
        raise BudgetError(f"budget {text!r} is more than {format_bytes(MAX_GRAPH_BYTES)}, more memory than any graph "
                          f"this tool reads can use; a budget at the checkpoint-all peak already needs no "
                          f"recomputation")
    return int((number * factor / divisor).to_integral_value(rounding=ROUND_FLOOR))


def budget_text(nbytes: int, unit: str = "B") -> str:
    """The shortest text in ``unit`` (``MiB``, ``GiB``, ...) that :func:`parse_budget` reads back as exactly
    ``nbytes``: ``budget_text(3 * 2**29, "GiB") == "1.5GiB"``; what links and the URL write.

    Raises
    ------
    BudgetError
        For a negative or non-integer ``nbytes`` or an unknown unit.
    """
    size = UNITS.get(unit.upper())
    if size is None or isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise BudgetError(f"cannot write {nbytes!r} bytes in {unit!r}: expected a non-negative integer and one of "
                          f"{', '.join(UNITS)}")
    low, high = Fraction(nbytes, size), Fraction(nbytes + 1, size)  # texts in [low, high) read back as nbytes
    digits = 0
    while math.ceil(low * 10**digits) >= high * 10**digits:
        digits += 1
    return f"{Decimal(math.ceil(low * 10**digits)).scaleb(-digits):f}{unit}"


def format_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``: binary units, four significant figures."""
    value = float(n)
    if abs(value) < 1024:
        return f"{int(value)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "PiB":
            break
    return f"{value:.4g} {unit}"
