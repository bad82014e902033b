"""The SM-clock law of each kernel as twin prices it, read from its one statement in cost/sm_clock.hpp (time ~
clock^-e: GEMMs 1, attention its fitted exponents, a soft-capped loss 1, every other kernel 0), so that the profile
tools move timings between clocks as the simulator and `twin calibrate` do."""
import os
import re

HEADER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cost", "sm_clock.hpp")


def exponents(header=HEADER):
    """{"gemm": 1, "attention_forward": e_f, "attention_backward": e_b, "softcapped_loss": e_c}; exits naming the header
    when a constant is missing."""
    with open(header) as f:
        text = f.read()

    def constant(name):
        match = re.search(r"inline constexpr double %s = ([0-9.]+);" % name, text)
        if not match:
            raise SystemExit(f"{header}: {name} not found")
        return float(match.group(1))

    return {"gemm": 1.0, "attention_forward": constant("kAttentionForwardClockExponent"),
            "attention_backward": constant("kAttentionBackwardClockExponent"),
            "softcapped_loss": constant("kSoftcappedLossClockExponent")}


def is_softcapped_loss(key):
    """A loss entry whose logits are soft-capped (`loss_*:...,softcap=1`)."""
    kind, _, fields = key.partition(":")
    return kind in ("loss_forward", "loss_backward") and "softcap=1" in fields.split(",")


def exponent_of_key(key, law):
    """The exponent of a profile entry's shape key under `law` (exponents()): a soft-capped loss's, its kind's, or 0."""
    if is_softcapped_loss(key):
        return law["softcapped_loss"]
    return law.get(key.split(":", 1)[0], 0.0)
