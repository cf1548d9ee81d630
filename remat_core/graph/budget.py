"""Memory budgets as people write them: ``123456``, ``512MiB``, ``1.5GB``, ``64KiB``, ``70%``."""

from __future__ import annotations

import re
from decimal import ROUND_FLOOR, Decimal, InvalidOperation

from ..errors import BudgetError

UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
         "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*|%)\s*$")
_EXPECTED = ("bytes (123456), a number with a unit (512MiB, 1.5GB, 64KiB; units B, KB, MB, GB, TB, KiB, MiB, "
             "GiB, TiB) or a percent of the checkpoint-all peak (70%)")


def parse_budget(text: str, checkpoint_all_peak: int | None = None) -> int:
    """Bytes from a budget written as bytes, with a unit, or as a percent of the checkpoint-all peak.

    Fractions of a byte are rounded down. A percent needs ``checkpoint_all_peak``.

    Raises
    ------
    BudgetError
        For text that is not one of those forms, or a percent without a peak to take it of.
    """
    match = _PATTERN.match(str(text))
    if not match:
        raise BudgetError(f"cannot read budget {text!r}: expected {_EXPECTED}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        raise BudgetError(f"cannot read budget {text!r}: expected {_EXPECTED}") from None
    unit = match.group(2)
    if unit == "%":
        if checkpoint_all_peak is None:
            raise BudgetError(f"budget {text!r} is a percent, but there is no checkpoint-all peak to take it of")
        value = number * checkpoint_all_peak / 100
    else:
        factor = UNITS.get(unit.upper() if unit else "B")
        if factor is None:
            raise BudgetError(f"unknown unit {unit!r} in budget {text!r}: expected {_EXPECTED}")
        value = number * factor
    return int(value.to_integral_value(rounding=ROUND_FLOOR))


def format_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``: binary units, four significant figures."""
    value = float(n)
    if abs(value) < 1024:
        return f"{int(value)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "TiB":
            break
    return f"{value:.4g} {unit}"
