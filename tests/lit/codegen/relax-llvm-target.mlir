// RUN: relaxmlir-opt %s '--relax-llvm-target=target="llvm -mcpu=x86-64-v3"' | FileCheck %s --check-prefix=AVX2
// RUN: relaxmlir-opt %s '--relax-llvm-target=target="llvm -mcpu=x86-64-v4 -mattr=-avx512vl"' | FileCheck %s --check-prefix=AVX512
// RUN: relaxmlir-opt %s '--relax-llvm-target=target="llvm -mcpu=x86-64"' | FileCheck %s --check-prefix=SSE
// RUN: not relaxmlir-opt %s '--relax-llvm-target=target="llvm -mcpu=pentium"' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not relaxmlir-opt %s '--relax-llvm-target=target="cuda"' 2>&1 | FileCheck %s --check-prefix=KIND

// BAD: error: relax-llvm-target: target=(llvm -mcpu=pentium): unknown CPU 'pentium'; known: x86-64,
// KIND: error: relax-llvm-target: expected an llvm target, got (cuda

// Every defined llvm.func is compiled for the target's CPU and exactly its features (the others
// are switched off, so no host feature leaks in); C-interface wrappers stay out of line;
// declarations are left alone.
// AVX2-LABEL: llvm.func @kernel
// AVX2-NOT: no_inline
// AVX2-SAME: target_cpu = "x86-64-v3"
// AVX2-SAME: "+avx2"
// AVX2-SAME: "+fma"
// AVX2-SAME: "-avx512f"
// AVX2-LABEL: llvm.func @_mlir_ciface_kernel
// AVX2-SAME: no_inline
// AVX2: llvm.func @external(f32) -> f32{{$}}

// AVX512-LABEL: llvm.func @kernel
// AVX512-SAME: target_cpu = "x86-64-v4"
// AVX512-SAME: "+avx512f"
// AVX512-SAME: "-avx512vl"

// SSE-LABEL: llvm.func @kernel
// SSE-SAME: target_cpu = "x86-64"
// SSE-SAME: "+sse2"
// SSE-SAME: "-avx"

// Kernels (relax.prim_func) stay out of line too, forking or not: inlined into the graph
// function they were compiled twice (their external definitions stay), and their OpenMP regions
// tied it to every kernel when code generation is split. Other functions (@kernel above) may be
// inlined.
// AVX2-LABEL: llvm.func @prim
// AVX2-SAME: no_inline
llvm.func @kernel(%a: f32) -> f32 {
  %r = llvm.call @external(%a) : (f32) -> f32
  llvm.return %r : f32
}
llvm.func @_mlir_ciface_kernel(%a: f32) -> f32 {
  %r = llvm.call @kernel(%a) : (f32) -> f32
  llvm.return %r : f32
}
llvm.func @external(f32) -> f32
llvm.func @prim(%p: !llvm.ptr) attributes {relax.prim_func} {
  llvm.return
}
