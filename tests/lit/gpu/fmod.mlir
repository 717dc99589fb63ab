// RUN: relaxmlir-opt %s --gpu-kernel-outlining --relax-gpu-fmod | FileCheck %s
// RUN: relaxmlir-opt %s --pass-pipeline='builtin.module(gpu-kernel-outlining,relax-gpu-fmod,convert-arith-to-llvm,gpu.module(convert-gpu-to-nvvm))' \
// RUN:   | FileCheck %s --check-prefix=NVVM

// relax.mod (torch.fmod) is arith.remf. The cuda row converts arith to LLVM before NVVM
// lowering, which refuses the resulting llvm.frem ("explicitly marked illegal"): device remf
// becomes libdevice's fmod first, one declaration per gpu.module; a 16-bit remf goes through
// f32 (fmod is exact there).
// CHECK: gpu.module @fmod_kernel
// CHECK-DAG: llvm.func @__nv_fmodf(f32, f32) -> f32
// CHECK-DAG: llvm.func @__nv_fmod(f64, f64) -> f64
// CHECK: gpu.func @fmod_kernel(
// CHECK-NOT: arith.remf
// CHECK: llvm.call @__nv_fmodf(%{{.+}}, %{{.+}}) : (f32, f32) -> f32
// CHECK: %[[A:.+]] = arith.extf %{{.+}} : f16 to f32
// CHECK: %[[B:.+]] = arith.extf %{{.+}} : f16 to f32
// CHECK: %[[R:.+]] = llvm.call @__nv_fmodf(%[[A]], %[[B]]) : (f32, f32) -> f32
// CHECK: arith.truncf %[[R]] : f32 to f16
// CHECK: llvm.call @__nv_fmod(%{{.+}}, %{{.+}}) : (f64, f64) -> f64
// CHECK-NOT: arith.remf
// NVVM-NOT: llvm.frem
// NVVM: llvm.call @__nv_fmodf
// NVVM-NOT: llvm.frem
func.func @fmod(%x: memref<256xf32>, %h: memref<256xf16>, %d: memref<256xf64>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<256xf32>
    %r = arith.remf %v, %v : f32
    memref.store %r, %x[%tx] : memref<256xf32>
    %w = memref.load %h[%tx] : memref<256xf16>
    %q = arith.remf %w, %w : f16
    memref.store %q, %h[%tx] : memref<256xf16>
    %e = memref.load %d[%tx] : memref<256xf64>
    %f = arith.remf %e, %e : f64
    memref.store %f, %d[%tx] : memref<256xf64>
    gpu.terminator
  }
  return
}
