#!/usr/bin/env python
"""Measured f32 peak of this CPU: independent FMA chains on its widest vectors, in C.

    python scripts/peak.py              # 1 thread and all cores
    python scripts/peak.py --threads 1,2,4

A tiny C program (compiled with the system `cc -O2 -march=native -pthread`) runs 12 independent
accumulators of `__m512` + `_mm512_fmadd_ps` where the compiler defines `__AVX512F__`, else `__m256`
+ `_mm256_fmadd_ps` (AVX2 + FMA), else NEON `vfmaq_f32`, else scalar `fmaf`, for about 0.2 s per
thread. GFLOP/s = 2 * lanes * accumulators * iterations / the thread's CPU time, summed over the
threads (unpinned; one process per thread count; best of a few runs): a busy machine does not
lower it, so it stays the cores' peak. Needs numpy, torch and relaxmlir: none of them.

Also the memory read bandwidth (`bandwidth`: each thread sums its share of a 256 MB buffer,
wall time), the bound of workloads that stream more than the caches hold, such as a decode
step's weights: on a 2-vCPU cloud VM the second core may add little to it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The headers both programs include, and the widest f32 vector of the compiler's target:
# `vec`, LANES, SET1, FMA, LOAD, first().
PRELUDE = r"""
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
#define LANES 16
#define KERNEL "avx512 __m512 _mm512_fmadd_ps"
#define SET1(x) _mm512_set1_ps(x)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
static float first(vec v) { return _mm512_cvtss_f32(v); }
#define LOAD(p) _mm512_loadu_ps(p)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
#define LANES 8
#define KERNEL "avx2 __m256 _mm256_fmadd_ps"
#define SET1(x) _mm256_set1_ps(x)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static float first(vec v) { return _mm256_cvtss_f32(v); }
#define LOAD(p) _mm256_loadu_ps(p)
#elif defined(__ARM_NEON)
#include <arm_neon.h>
typedef float32x4_t vec;
#define LANES 4
#define KERNEL "neon float32x4_t vfmaq_f32"
#define SET1(x) vdupq_n_f32(x)
#define FMA(a, b, c) vfmaq_f32(c, a, b)
static float first(vec v) { return vgetq_lane_f32(v, 0); }
#define LOAD(p) vld1q_f32(p)
#else
typedef float vec;
#define LANES 1
#define KERNEL "scalar fmaf"
#define SET1(x) (x)
#define FMA(a, b, c) fmaf(a, b, c)
static float first(vec v) { return v; }
#define LOAD(p) (*(p))
#endif

/* seconds on `clock`: a thread's CPU time (the FMA loop) or the wall (the memory reads) */
static double seconds_on(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

"""

C_SOURCE = (
    PRELUDE
    + r"""
#define ACCS 12
#define CHUNK 100000L

static double seconds;
static pthread_barrier_t barrier;
volatile float sink;

typedef struct { long iters; double elapsed; } result_t;

/* the thread's own CPU time: another process sharing the core (these machines are small and
   shared) takes wall time from the loop, not cycles, so the rate stays the core's */
static double now(void) { return seconds_on(CLOCK_THREAD_CPUTIME_ID); }

static void *work(void *arg) {
    result_t *res = (result_t *)arg;
    /* acc = acc * a + b converges to b / (1 - a) = 1: no overflow, no denormals */
    const vec a = SET1(0.999999f), b = SET1(1e-6f);
    vec c0 = SET1(0.f), c1 = SET1(.1f), c2 = SET1(.2f), c3 = SET1(.3f), c4 = SET1(.4f), c5 = SET1(.5f);
    vec c6 = SET1(.6f), c7 = SET1(.7f), c8 = SET1(.8f), c9 = SET1(.9f), c10 = SET1(1.f), c11 = SET1(1.1f);
    long iters = 0;
    pthread_barrier_wait(&barrier);
    double t0 = now(), t;
    do {
        for (long i = 0; i < CHUNK; ++i) {
            c0 = FMA(c0, a, b); c1 = FMA(c1, a, b); c2 = FMA(c2, a, b); c3 = FMA(c3, a, b);
            c4 = FMA(c4, a, b); c5 = FMA(c5, a, b); c6 = FMA(c6, a, b); c7 = FMA(c7, a, b);
            c8 = FMA(c8, a, b); c9 = FMA(c9, a, b); c10 = FMA(c10, a, b); c11 = FMA(c11, a, b);
        }
        iters += CHUNK;
        t = now() - t0;
    } while (t < seconds);
    sink = first(c0) + first(c1) + first(c2) + first(c3) + first(c4) + first(c5) + first(c6)
         + first(c7) + first(c8) + first(c9) + first(c10) + first(c11);
    res->iters = iters;
    res->elapsed = t;
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    seconds = argc > 2 ? atof(argv[2]) : 0.2;
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    if (threads < 1) threads = 1;
    pthread_t *tid = malloc(sizeof(pthread_t) * threads);
    result_t *res = calloc(threads, sizeof(result_t));
    double best = 0.0;
    for (int run = 0; run < runs; ++run) {
        pthread_barrier_init(&barrier, NULL, threads);
        for (int i = 0; i < threads; ++i) pthread_create(&tid[i], NULL, work, &res[i]);
        double gflops = 0.0;
        for (int i = 0; i < threads; ++i) {
            pthread_join(tid[i], NULL);
            gflops += 2.0 * LANES * ACCS * (double)res[i].iters / res[i].elapsed * 1e-9;
        }
        pthread_barrier_destroy(&barrier);
        if (gflops > best) best = gflops;
    }
    printf("kernel=%s lanes=%d accumulators=%d threads=%d gflops=%.3f\n", KERNEL, LANES, ACCS, threads, best);
    return 0;
}
"""
)


# Memory read bandwidth: each thread sums its share of a buffer far larger than the caches,
# as 4 sequential streams side by side (one stream alone stays below a core's bandwidth on
# these machines), a few passes; bytes read by all threads / the slowest thread's wall time.
BANDWIDTH_SOURCE = (
    PRELUDE
    + r"""
#define STREAMS 4

static pthread_barrier_t barrier;
static float *buffer;
static long share;
static int passes;
volatile float sink;

typedef struct { long id; double elapsed; } job_t;

static double wall(void) { return seconds_on(CLOCK_MONOTONIC); }

static void *work(void *arg) {
    job_t *job = (job_t *)arg;
    const float *p = buffer + job->id * share;
    const long part = share / STREAMS;
    const vec one = SET1(1.f);
    vec a0 = SET1(0.f), a1 = a0, a2 = a0, a3 = a0;
    pthread_barrier_wait(&barrier);
    double t0 = wall();
    for (int r = 0; r < passes; ++r)
        for (long j = 0; j < part; j += LANES) {
            a0 = FMA(LOAD(p + j), one, a0);
            a1 = FMA(LOAD(p + part + j), one, a1);
            a2 = FMA(LOAD(p + 2 * part + j), one, a2);
            a3 = FMA(LOAD(p + 3 * part + j), one, a3);
        }
    job->elapsed = wall() - t0;
    sink = first(a0) + first(a1) + first(a2) + first(a3);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    long megabytes = argc > 2 ? atol(argv[2]) : 256;
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    passes = argc > 4 ? atoi(argv[4]) : 4;
    if (threads < 1) threads = 1;
    long total = (megabytes << 20) / (long)sizeof(float);
    share = total / threads / (STREAMS * LANES) * (STREAMS * LANES);
    buffer = aligned_alloc(4096, (size_t)total * sizeof(float));
    if (buffer == NULL) { fprintf(stderr, "out of memory\n"); return 1; }
    for (long i = 0; i < total; ++i) buffer[i] = 1.f;  /* every page touched before timing */
    pthread_t *tid = malloc(sizeof(pthread_t) * threads);
    job_t *jobs = calloc(threads, sizeof(job_t));
    double best = 0.0;
    for (int run = 0; run < runs; ++run) {
        pthread_barrier_init(&barrier, NULL, threads);
        for (long i = 0; i < threads; ++i) {
            jobs[i].id = i;
            pthread_create(&tid[i], NULL, work, &jobs[i]);
        }
        double slowest = 0.0;
        for (int i = 0; i < threads; ++i) {
            pthread_join(tid[i], NULL);
            if (jobs[i].elapsed > slowest) slowest = jobs[i].elapsed;
        }
        pthread_barrier_destroy(&barrier);
        double gbs = (double)threads * share * sizeof(float) * passes / slowest * 1e-9;
        if (gbs > best) best = gbs;
    }
    printf("threads=%d megabytes=%ld gbs=%.3f\n", threads, megabytes, best);
    return 0;
}
"""
)


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


# Code-generation flags per vector ISA: the host's own, or AVX2 + FMA on any x86-64 that has them
# (what an AVX2-only CPU of the pool runs, measured on a wider one).
ISA_FLAGS = {"native": ["-march=native"], "avx2": ["-mavx2", "-mfma", "-mno-avx512f"]}


def compile_c(source: str, exe: str | os.PathLike, flags: list[str]) -> Path:
    """Compile the C program `source` into the executable `exe` (its source beside it, `.c`)
    with `cc -O2 -pthread`, `flags` last (libraries too); raises RuntimeError when that is
    impossible."""
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc, clang) on PATH")
    exe = Path(exe)
    src = exe.with_suffix(".c")
    src.write_text(source)
    cmd = [cc, "-O2", "-pthread", str(src), "-o", str(exe), *flags]
    proc = subprocess.run(
        cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stdout.strip()[:400]}")
    return exe


def build(workdir: str | os.PathLike, isa: str = "native") -> Path:
    """Compile the FMA program into `workdir`; raises RuntimeError when that is impossible."""
    return compile_c(C_SOURCE, Path(workdir) / "peak", [*ISA_FLAGS[isa], "-lm"])


def _report(exe: str | os.PathLike, args: list, pattern: str) -> re.Match:
    """Run one of the C programs with `args` and match its report line against `pattern`."""
    out = subprocess.run(
        [str(exe), *map(str, args)], stdout=subprocess.PIPE, text=True, check=True
    ).stdout
    m = re.search(pattern, out)
    if m is None:
        raise RuntimeError(f"unexpected output from {exe}: {out!r}")
    return m


def run(exe: str | os.PathLike, threads: int, seconds: float = 0.2, runs: int = 3) -> dict:
    """One process with `threads` unpinned threads; the best of `runs` runs of `seconds` each."""
    m = _report(
        exe,
        [threads, seconds, runs],
        r"kernel=(.*) lanes=(\d+) accumulators=(\d+) threads=(\d+) gflops=([\d.]+)",
    )
    return {
        "kernel": m.group(1),
        "lanes": int(m.group(2)),
        "accumulators": int(m.group(3)),
        "threads": int(m.group(4)),
        "gflops": float(m.group(5)),
    }


def measure(thread_counts, seconds: float = 0.2, runs: int = 3, isa: str = "native") -> dict:
    """{"kernel", "lanes", "gflops": {threads: total GFLOP/s}} or {"error": why}."""
    try:
        with tempfile.TemporaryDirectory(prefix="relaxmlir-peak-") as tmp:
            exe = build(tmp, isa)
            results = {t: run(exe, t, seconds, runs) for t in sorted(set(thread_counts))}
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        return {"error": str(exc)}
    first = next(iter(results.values()))
    return {
        "kernel": first["kernel"],
        "lanes": first["lanes"],
        "accumulators": first["accumulators"],
        "isa": isa,
        "gflops": {t: r["gflops"] for t, r in results.items()},
    }


def bandwidth(thread_counts, megabytes: int = 256, runs: int = 5, isa: str = "native") -> dict:
    """Memory read bandwidth, {"gbs": {threads: GB/s}} or {"error": why}: the bound of a
    workload that streams more than the caches hold (a decode step's weights)."""
    try:
        with tempfile.TemporaryDirectory(prefix="relaxmlir-bandwidth-") as tmp:
            exe = compile_c(BANDWIDTH_SOURCE, Path(tmp) / "bandwidth", [*ISA_FLAGS[isa], "-lm"])
            pattern = r"threads=(\d+) megabytes=(\d+) gbs=([\d.]+)"
            gbs = {
                t: float(_report(exe, [t, megabytes, runs], pattern).group(3))
                for t in sorted(set(thread_counts))
            }
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        return {"error": str(exc)}
    return {"megabytes": megabytes, "gbs": gbs}


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    for key in ("model name", "Model", "Hardware"):
        for line in text.splitlines():
            if line.split(":", 1)[0].strip() == key:
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def vector_isa() -> str:
    """The widest f32 vector ISA in /proc/cpuinfo's flags, with notable extensions."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown ISA"
    flags: set[str] = set()
    for line in text.splitlines():
        if line.split(":", 1)[0].strip() in ("flags", "Features"):
            flags = set(line.split(":", 1)[1].split())
            break
    if "avx512f" in flags:
        extras = [
            name
            for flag, name in (
                ("avx512_vnni", "VNNI"),
                ("avx512_bf16", "BF16"),
                ("avx512_fp16", "FP16"),
                ("amx_tile", "AMX"),
            )
            if flag in flags
        ]
        return "AVX-512" + (f" (+{', '.join(extras)})" if extras else "")
    if "avx2" in flags:
        return "AVX2" + (" + FMA" if "fma" in flags else "")
    if "avx" in flags:
        return "AVX"
    if "sve" in flags:
        return "SVE + NEON"
    if "asimd" in flags:
        return "NEON"
    if "sse2" in flags:
        return "SSE2"
    return "unknown ISA"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", default=f"1,{os.cpu_count()}", help="comma-separated thread counts"
    )
    parser.add_argument("--seconds", type=float, default=0.2)
    args = parser.parse_args(argv)
    peak = measure([int(t) for t in args.threads.split(",")], args.seconds)
    print(f"{cpu_model()}, {vector_isa()}, {os.cpu_count()} cores")
    if "error" in peak:
        print(f"peak not measured: {peak['error']}")
        return 1
    print(f"kernel: {peak['kernel']}, {peak['accumulators']} independent accumulators")
    for t, g in peak["gflops"].items():
        print(f"{t:3d} thread(s): {g:8.1f} GFLOP/s f32 ({g / t:.1f} per core)")
    memory = bandwidth([int(t) for t in args.threads.split(",")])
    if "error" in memory:
        print(f"memory bandwidth not measured: {memory['error']}")
        return 1
    for t, g in memory["gbs"].items():
        print(f"{t:3d} thread(s): {g:8.1f} GB/s read from memory ({memory['megabytes']} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
