"""The SM-clock law of each kernel kind as twin prices it, read from its one statement in cost/sm_clock.hpp (time ~
clock^-e: GEMMs 1, attention its fitted exponents, every other kind 0), so that the profile tools move timings between
clocks as the simulator and `twin calibrate` do."""
import os
import re

HEADER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cost", "sm_clock.hpp")


def exponents(header=HEADER):
    """{"gemm": 1, "attention_forward": e_f, "attention_backward": e_b}; exits naming the header when a constant is
    missing."""
    with open(header) as f:
        text = f.read()

    def constant(name):
        match = re.search(r"inline constexpr double %s = ([0-9.]+);" % name, text)
        if not match:
            raise SystemExit(f"{header}: {name} not found")
        return float(match.group(1))

    return {"gemm": 1.0, "attention_forward": constant("kAttentionForwardClockExponent"),
            "attention_backward": constant("kAttentionBackwardClockExponent")}
