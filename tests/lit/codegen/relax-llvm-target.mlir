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


// C-interface wrappers of more than 64 arguments (the entry points of a model whose weights are
// inputs) compile without optimization: they only unpack descriptors, and at -O3 instruction
// selection and scheduling of their call with thousands of operands took seconds.
// AVX2-LABEL: llvm.func @_mlir_ciface_wide
// AVX2-SAME: passthrough = ["optnone"]
// AVX2-LABEL: llvm.func @_mlir_ciface_narrow
// AVX2-NOT: optnone
// AVX2: llvm.return
llvm.func @_mlir_ciface_wide(%a0: !llvm.ptr, %a1: !llvm.ptr, %a2: !llvm.ptr, %a3: !llvm.ptr, %a4: !llvm.ptr, %a5: !llvm.ptr, %a6: !llvm.ptr, %a7: !llvm.ptr, %a8: !llvm.ptr, %a9: !llvm.ptr, %a10: !llvm.ptr, %a11: !llvm.ptr, %a12: !llvm.ptr, %a13: !llvm.ptr, %a14: !llvm.ptr, %a15: !llvm.ptr, %a16: !llvm.ptr, %a17: !llvm.ptr, %a18: !llvm.ptr, %a19: !llvm.ptr, %a20: !llvm.ptr, %a21: !llvm.ptr, %a22: !llvm.ptr, %a23: !llvm.ptr, %a24: !llvm.ptr, %a25: !llvm.ptr, %a26: !llvm.ptr, %a27: !llvm.ptr, %a28: !llvm.ptr, %a29: !llvm.ptr, %a30: !llvm.ptr, %a31: !llvm.ptr, %a32: !llvm.ptr, %a33: !llvm.ptr, %a34: !llvm.ptr, %a35: !llvm.ptr, %a36: !llvm.ptr, %a37: !llvm.ptr, %a38: !llvm.ptr, %a39: !llvm.ptr, %a40: !llvm.ptr, %a41: !llvm.ptr, %a42: !llvm.ptr, %a43: !llvm.ptr, %a44: !llvm.ptr, %a45: !llvm.ptr, %a46: !llvm.ptr, %a47: !llvm.ptr, %a48: !llvm.ptr, %a49: !llvm.ptr, %a50: !llvm.ptr, %a51: !llvm.ptr, %a52: !llvm.ptr, %a53: !llvm.ptr, %a54: !llvm.ptr, %a55: !llvm.ptr, %a56: !llvm.ptr, %a57: !llvm.ptr, %a58: !llvm.ptr, %a59: !llvm.ptr, %a60: !llvm.ptr, %a61: !llvm.ptr, %a62: !llvm.ptr, %a63: !llvm.ptr, %a64: !llvm.ptr) {
  llvm.return
}
llvm.func @_mlir_ciface_narrow(%a0: !llvm.ptr, %a1: !llvm.ptr) {
  llvm.return
}

// Argument annotations other than LLVM's are dropped (translation to LLVM IR looked each one up,
// ~5 ms apiece: a model's weights as arguments carry hundreds); LLVM's stay.
// AVX2-LABEL: llvm.func @named
// AVX2-SAME: (%{{.+}}: !llvm.ptr {llvm.noalias}, %{{.+}}: !llvm.ptr)
// AVX2-NOT: relax.name
// AVX2: llvm.return
llvm.func @named(%a: !llvm.ptr {relax.name = "x", llvm.noalias}, %b: !llvm.ptr {relax.name = "w"}) attributes {relax.function} {
  llvm.return
}
