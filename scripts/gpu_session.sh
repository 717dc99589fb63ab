#!/usr/bin/env bash
# A GPU session in the two halves this workplace allows: the GPU machine has no MLIR, so what
# runs there is built here first (README, "The CUDA target").
#
#   bash scripts/gpu_session.sh prepare [TRIALS]   # here: the model checks, the cublas cases,
#                                                  # the benchmark and TRIALS tuning candidates
#                                                  # (default 120: what travels to the device
#                                                  # is capped at 64 MiB, models ~36 MB)
#   bash scripts/gpu_session.sh device [PARTS] [S] # there, in one call of at most S seconds
#                                                  # (default 540): all of them, results (logs,
#                                                  # RESULTS_GPU.md, trial results) in $OUT
#   bash scripts/gpu_session.sh tuned OUT_FOLDER   # here: read the trial results back and build
#                                                  # the benchmark with the tuned records
#
# Carry gpu_models, gpu_libs, gpu_trials, gpu_trials_mma, cublas_libs (and gpu_tuned after
# `tuned`) and relaxmlir/runtime/native.
set -u
cd "$(dirname "$0")/.."

case "${1:-}" in
prepare)
    python scripts/gpu_models_check.py export --out gpu_models || exit 1
    python scripts/cublas_gpu_check.py export --out cublas_libs || exit 1
    python scripts/bench_gpu.py export --out gpu_libs || exit 1
    python scripts/bench_gpu.py trials --out gpu_trials --work-dir gpu_tuning --trials "${2:-120}" || exit 1
    # the 4096^3 tensor-core matmuls on their own: every tile, K step, split and ring depth
    python scripts/bench_gpu.py trials --out gpu_trials_mma --work-dir gpu_tuning_mma --trials 60 \
        --only matmul_f16,matmul_tf32 || exit 1
    du -sh gpu_models gpu_libs gpu_trials gpu_trials_mma cublas_libs
    total=$(du -sm gpu_models gpu_libs gpu_trials gpu_trials_mma cublas_libs relaxmlir/runtime/native | awk '{s += $1} END {print s}')
    echo "to carry: ${total} MB (at most 64 MiB travel, the working tree included)"
    ((total <= 62)) || echo "too much to carry: prepare again with fewer trials" >&2
    ;;
device)
    # parts (default all): models, runtime, cublas, bench, trials, tuned (the last when gpu_tuned
    # exists), in that order; each part's timeout is cut to what is left of S seconds
    parts="${2:-models,runtime,cublas,bench,trials,tuned}"
    deadline=$((SECONDS + ${3:-540}))
    out="${OUT:-gpu_out}"
    mkdir -p "$out"
    left() { # the smaller of $1 and the seconds left before the deadline (at least 1)
        local rest=$((deadline - SECONDS))
        ((rest < 1)) && rest=1
        echo $(($1 < rest ? $1 : rest))
    }
    want() { [[ ",$parts," == *,$1,* ]]; }
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
    python3 --version >> "$out/gpu.txt" 2>&1
    if want models; then
        timeout "$(left 150)" python3 scripts/gpu_models_check.py run --libs gpu_models > "$out/models.txt" 2>&1
        echo "models: exit $?" >> "$out/status.txt"
    fi
    if want runtime; then
        timeout "$(left 60)" python3 scripts/gpu_runtime_check.py --libs gpu_models > "$out/runtime.txt" 2>&1
        echo "runtime: exit $?" >> "$out/status.txt"
    fi
    if want cublas && [ -d cublas_libs ]; then
        timeout "$(left 60)" python3 scripts/cublas_gpu_check.py run --libs cublas_libs > "$out/cublas.txt" 2>&1
        echo "cublas: exit $?" >> "$out/status.txt"
    fi
    if want bench; then
        timeout "$(left 200)" python3 scripts/bench_gpu.py run --libs gpu_libs --repeat 20 --timeout 40 \
            --profile --results "$out/RESULTS_GPU.md" > "$out/bench.txt" 2>&1
        echo "bench: exit $?" >> "$out/status.txt"
    fi
    if want trials; then
        folders=(gpu_trials)
        for f in gpu_trials/tf32 gpu_trials/sm_90a gpu_trials_mma gpu_trials_mma/tf32; do
            [ -f $f/trials.json ] && folders+=($f)
        done
        timeout "$(left 220)" python3 -m relaxmlir.runtime.trials "${folders[@]}" --timeout 20 \
            > "$out/trials.txt" 2>&1
        echo "trials: exit $? (a stopped run resumes where it was)" >> "$out/status.txt"
        for f in "${folders[@]}"; do
            # flat names: the device tool left nested result files behind
            [ -f "$f/results.jsonl" ] && cp "$f/results.jsonl" "$out/results_${f//\//_}.jsonl"
        done
    fi
    if want tuned && [ -d gpu_tuned ]; then
        timeout "$(left 200)" python3 scripts/bench_gpu.py run --libs gpu_tuned --repeat 20 --timeout 40 \
            --results "$out/RESULTS_GPU_TUNED.md" > "$out/bench_tuned.txt" 2>&1
        echo "bench tuned: exit $?" >> "$out/status.txt"
    fi
    cat "$out/status.txt"
    ;;
tuned)
    results="${2:?give the output folder of the device run}"
    for f in gpu_trials gpu_trials/tf32 gpu_trials/sm_90a gpu_trials_mma gpu_trials_mma/tf32; do
        [ -f "$results/results_${f//\//_}.jsonl" ] && cp "$results/results_${f//\//_}.jsonl" "$f/results.jsonl"
    done
    python scripts/bench_gpu.py export --out gpu_tuned --tuned gpu_tuning --import gpu_trials
    ;;
*)
    sed -n 2,19p "$0"
    exit 2
    ;;
esac
