"""argparse types the benchmark scripts share: a bad argument is a usage error naming it, never a traceback."""
from __future__ import annotations

import argparse
import math


def whole_number(text: str, least: int = 1, why: str = "") -> int:
    """A whole number of at least ``least`` (``why`` follows the bound in the error)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if number < least:
        raise argparse.ArgumentTypeError(f"{number} is less than {least}{why}")
    return number


def whole_numbers(text: str) -> list[int]:
    """Comma-separated whole numbers of at least 1 ('' for none)."""
    try:
        numbers = [int(part) for part in text.split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not comma-separated whole numbers") from None
    if any(number < 1 for number in numbers):
        raise argparse.ArgumentTypeError(f"{text!r}: every count must be at least 1")
    return numbers


def seconds(text: str) -> float:
    """A finite duration above 0 seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text} is not a duration above 0 seconds")
    return value
