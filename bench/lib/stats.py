"""Statistics and number formatting for the sbx benchmark report (Python 3 stdlib only).

Kept free of I/O so tests/integration/bench/test_stats.py can check it on known samples.
"""

import math


def percentile(samples, p):
    """The p-th percentile (0..100) with linear interpolation between closest ranks.

    Same definition as numpy's default ("linear", type 7 of Hyndman & Fan): the value at
    fractional rank (n - 1) * p / 100 of the sorted sample. None for an empty sample.
    """
    if not samples:
        return None
    if not 0 <= p <= 100:
        raise ValueError("percentile must be in [0, 100]")
    xs = sorted(samples)
    rank = (len(xs) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = math.ceil(rank)
    if lo == hi:
        return float(xs[lo])
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def summarize(samples, exit_codes=None):
    """Latency summary of one measurement.

    samples: run times in seconds, one per run (failed runs included, in run order).
    exit_codes: one per sample (None = all succeeded). Percentiles are over the successful
    runs only; failed runs are counted in 'failures', never silently dropped.
    """
    if exit_codes is None:
        exit_codes = [0] * len(samples)
    if len(exit_codes) != len(samples):
        raise ValueError("one exit code per sample")
    ok = [s for s, c in zip(samples, exit_codes) if c == 0]
    out = {"runs": len(samples), "failures": len(samples) - len(ok), "ok": len(ok)}
    if not ok:
        return out
    out.update(
        {
            "min": min(ok),
            "p50": percentile(ok, 50),
            "p90": percentile(ok, 90),
            "p99": percentile(ok, 99),
            "max": max(ok),
            "mean": sum(ok) / len(ok),
        }
    )
    return out


def ratio(peer, sbx):
    """peer / sbx as a float, or None when either side is missing or not positive."""
    if peer is None or sbx is None or peer <= 0 or sbx <= 0:
        return None
    return peer / sbx


def ratio_text(peer_name, peer, sbx):
    """'bwrap/sbx = 1.8x (sbx faster)' for two latencies (lower is better)."""
    r = ratio(peer, sbx)
    if r is None:
        return "n/a"
    if r > 1.0:
        verdict = "sbx faster"
    elif r < 1.0:
        verdict = "sbx slower"
    else:
        verdict = "equal"
    return f"{peer_name}/sbx = {r:.2f}\u00d7 ({verdict})"


def fmt_ms(seconds):
    """Seconds as milliseconds with precision that suits the magnitude; '-' for None."""
    if seconds is None:
        return "-"
    ms = seconds * 1000.0
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.2f}"


def fmt_bytes(n):
    """Bytes in binary units: 1536 -> '1.5 KiB'."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def cdf_points(samples):
    """(value, cumulative fraction) pairs for an empirical CDF plot."""
    xs = sorted(samples)
    n = len(xs)
    return [(x, (i + 1) / n) for i, x in enumerate(xs)]


def linear_slope(points):
    """Least-squares slope of y over x for [(x, y), ...]; None with < 2 distinct x."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0:
        return None
    sxy = sum((p[0] - mx) * (p[1] - my) for p in points)
    return sxy / sxx
