"""Targets for tests that run what they build: the pool's CPUs differ (AVX-512 Zen 4/5, AVX2-only
Zen 3), and code for features the machine lacks is refused at load time (`Target.runs_on_host`)."""

from __future__ import annotations

from relaxmlir.target import Target

# Preferred first: the widest generic level, then AVX2, then the host's own CPU.
LEVELS = ("x86-64-v4", "x86-64-v3")


def runnable(spec: dict) -> dict:
    """`spec` (a target dict naming an `mcpu`) with the widest generic x86-64 level this machine
    runs in place of its `mcpu` when the machine lacks that CPU's features, else the host's
    own CPU; `spec` itself where it runs here."""
    if not Target(spec).runs_on_host():
        return spec
    for level in LEVELS:
        candidate = {**spec, "mcpu": level}
        if not Target(candidate).runs_on_host():
            return candidate
    return {key: value for key, value in spec.items() if key != "mcpu"}
