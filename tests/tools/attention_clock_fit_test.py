#!/usr/bin/env python3
"""tools/attention_clock_fit.py: log ratios interpolate linearly between candidate exponents and extrapolate from the
end segments, and the fitted exponent is the one where a study's ratios cross 1, the leave-one-out fit of a study
coming from the others alone. Usage: attention_clock_fit_test.py"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools"))
from attention_clock_fit import at, fit  # noqa: E402


def check(condition, what):
    if not condition:
        sys.exit("FAILED: " + what)


def line(zero_at, slope=-0.3):
    """A study's log(measured / priced) at candidates 0.5, 0.7, 0.9: zero where the law is right."""
    return [(e, slope * (e - zero_at)) for e in (0.5, 0.7, 0.9)]


def main():
    points = [(0.5, 0.2), (0.7, 0.0), (0.9, -0.4)]
    check(abs(at(points, 0.6) - 0.1) < 1e-12, "between the first two candidates")
    check(abs(at(points, 0.8) + 0.2) < 1e-12, "between the last two")
    check(abs(at(points, 0.4) - 0.3) < 1e-12, "below the first candidate: the first segment extended")
    check(abs(at(points, 1.0) + 0.6) < 1e-12, "above the last: the last segment extended")

    table = {name: {"attention_forward": line(zero)} for name, zero in (("a", 0.74), ("b", 0.76), ("c", 0.78))}
    check(fit(table, "attention_forward", ["a", "b", "c"]) == 0.76, "all three: the middle of their zeros")
    check(fit(table, "attention_forward", ["b", "c"]) == 0.77, "a held out: the other two's")
    print("attention_clock_fit: interpolation, extrapolation and the leave-one-out fit checked")


if __name__ == "__main__":
    main()
