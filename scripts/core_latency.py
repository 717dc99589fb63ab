#!/usr/bin/env python
"""Core-to-core round trip: how far apart the CPUs this process runs on are.

    python scripts/core_latency.py           # the first two CPUs of this process's affinity mask
    python scripts/core_latency.py --cpus 0,3

A tiny C program (the system `cc -O2 -pthread`) pins two threads to two CPUs and passes one cache
line back and forth; the round trip is the time one exchange takes. On the 2-vCPU machines of this
pool it reads ~60 ns while both vCPUs sit on cores that share an L3, and ~350 ns while the
hypervisor has put them on two different CCDs: this changes from minute to minute, and small
multi-threaded kernels (a d-256 encoder layer: torch's and ours alike) then run up to 1.5x slower,
their threads exchanging every intermediate through the far cache. scripts/bench.py records it
before and after each multi-threaded row. Needs neither numpy nor relaxmlir.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peak  # scripts/peak.py: compile_c

C_SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic long line __attribute__((aligned(128)));
static long rounds;
static int cpu_b;

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* answers each odd value with the next even one */
static void *echo(void *arg) {
    (void)arg;
    if (pin(cpu_b) != 0) { fprintf(stderr, "cannot pin to cpu %d\n", cpu_b); exit(2); }
    for (long i = 0; i < rounds; ++i) {
        while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i + 1) {}
        atomic_store_explicit(&line, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int cpu_a = argc > 1 ? atoi(argv[1]) : 0;
    cpu_b = argc > 2 ? atoi(argv[2]) : 1;
    rounds = argc > 3 ? atol(argv[3]) : 50000;
    if (pin(cpu_a) != 0) { fprintf(stderr, "cannot pin to cpu %d\n", cpu_a); return 2; }
    pthread_t tid;
    pthread_create(&tid, NULL, echo, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < rounds; ++i) {
        atomic_store_explicit(&line, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i + 2) {}
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(tid, NULL);
    double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / rounds;
    printf("cpus=%d,%d roundtrip_ns=%.1f\n", cpu_a, cpu_b, ns);
    return 0;
}
"""


def default_cpus() -> tuple[int, int] | None:
    """The first two CPUs this process may run on (None on a one-CPU machine)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None
    return (cpus[0], cpus[1]) if len(cpus) > 1 else None


class Probe:
    """The compiled program, kept for repeated measurements (bench.py measures per row)."""

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix="relaxmlir-c2c-")
        try:
            self.exe = peak.compile_c(C_SOURCE, Path(self._dir.name) / "c2c", [])
        except RuntimeError:
            self._dir.cleanup()
            raise

    def roundtrip_ns(self, cpus: tuple[int, int] | None = None, rounds: int = 50000) -> float:
        """One round trip between `cpus` (default: the first two), in ns; ~20 ms of work."""
        cpus = cpus or default_cpus()
        if cpus is None:
            raise RuntimeError("one CPU only: no core-to-core round trip")
        proc = subprocess.run(
            [str(self.exe), str(cpus[0]), str(cpus[1]), str(rounds)],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        m = re.search(r"roundtrip_ns=([\d.]+)", proc.stdout)
        if proc.returncode != 0 or m is None:
            raise RuntimeError(f"{self.exe}: {(proc.stderr or proc.stdout).strip()[:200]}")
        return float(m.group(1))

    def close(self):
        self._dir.cleanup()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", default=None, help="two CPU numbers, e.g. 0,1")
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)
    cpus = tuple(int(c) for c in args.cpus.split(",")) if args.cpus else default_cpus()
    if cpus is None or len(cpus) != 2:
        print("need two CPUs (--cpus A,B)")
        return 1
    try:
        probe = Probe()
        samples = [probe.roundtrip_ns(cpus) for _ in range(args.samples)]
        probe.close()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"not measured: {exc}")
        return 1
    print(
        f"cpus {cpus[0]} and {cpus[1]}: round trip "
        + ", ".join(f"{s:.0f}" for s in samples)
        + " ns"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
