"""Budget text: bytes, units, percents, and the messages for what cannot be read."""

import pytest

from remat_core import BudgetError, format_bytes, parse_budget


@pytest.mark.parametrize("text, expected", [
    ("123456", 123456), ("0", 0), ("512MiB", 512 * 2**20), ("1.5GB", 1_500_000_000), ("64KiB", 65536),
    ("64 KiB", 65536), ("2gib", 2 * 2**30), ("10B", 10), ("1e3", 1000), ("1.5", 1), ("3TB", 3 * 10**12),
])
def test_units(text, expected):
    assert parse_budget(text) == expected


def test_percent_of_checkpoint_all_peak():
    assert parse_budget("70%", 1000) == 700
    assert parse_budget("100%", 12345) == 12345
    assert parse_budget("33.3%", 1000) == 333
    assert parse_budget("150%", 10) == 15


@pytest.mark.parametrize("text, message", [
    ("lots", "cannot read budget 'lots'"), ("-5MiB", "is negative"), ("5 parsecs", "unknown unit .parsecs."),
    ("12XB", "unknown unit 'XB'"), ("", "cannot read budget"),
])
def test_bad_budget_text(text, message):
    with pytest.raises(BudgetError, match=message) as info:
        parse_budget(text, 100)
    assert "512MiB" in str(info.value)


def test_percent_needs_a_peak():
    with pytest.raises(BudgetError, match="percent"):
        parse_budget("50%")


@pytest.mark.parametrize("n, text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (512 * 2**20, "512 MiB"),
                                     (3 * 2**40, "3 TiB")])
def test_format_bytes(n, text):
    assert format_bytes(n) == text
