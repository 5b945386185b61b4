"""Summaries of repeated measurements: median, min..max, percentiles."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by the nearest-rank method (p99 of 1,000 values is the 990th).

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Summary:
    """Median and range of one measurement's repetitions (in the measurement's own unit)."""

    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> "Summary":
        """Raises ValueError when ``samples`` is empty."""
        if not samples:
            raise ValueError("no samples")
        return cls(statistics.median(samples), min(samples), max(samples), len(samples))

    def format(self, digits: int) -> str:
        """``"251 (240..262)"``; a single sample prints alone."""
        fmt = f"{{:,.{digits}f}}"
        if self.n == 1:
            return fmt.format(self.median)
        return f"{fmt.format(self.median)} ({fmt.format(self.low)}..{fmt.format(self.high)})"


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)
