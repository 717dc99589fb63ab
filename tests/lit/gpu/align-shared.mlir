// RUN: relaxmlir-opt %s --gpu-kernel-outlining --relax-gpu-align-shared | FileCheck %s
// RUN: relaxmlir-opt %s --pass-pipeline='builtin.module(gpu-kernel-outlining,relax-gpu-align-shared,gpu.module(convert-gpu-to-nvvm))' \
// RUN:   | FileCheck %s --check-prefix=NVVM

// A kernel with two shared tiles read as 16-byte vectors: both workgroup attributions get
// llvm.align = 16, so NVVM lowering declares the buffers 16-byte aligned (without it, the
// element's 4); a kernel without shared memory is left alone.
// CHECK: gpu.func @tiles_kernel({{.*}}) workgroup(%{{.+}} : memref<8x36xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.+}} : memref<8x36xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK: gpu.module @tiles_kernel_0
// CHECK: gpu.func @tiles_kernel(
// CHECK-NOT: llvm.align
// CHECK: gpu.return
// NVVM: llvm.mlir.global internal @__wg_tiles_kernel_0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<288 x f32>
// NVVM: llvm.mlir.global internal @__wg_tiles_kernel_1() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<288 x f32>
func.func @tiles(%out: memref<256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) workgroup(%a : memref<8x36xf32, #gpu.address_space<workgroup>>, %b : memref<8x36xf32, #gpu.address_space<workgroup>>) {
    %v = vector.load %a[%c0, %c0] : memref<8x36xf32, #gpu.address_space<workgroup>>, vector<4xf32>
    %w = vector.load %b[%c0, %c0] : memref<8x36xf32, #gpu.address_space<workgroup>>, vector<4xf32>
    %s = arith.addf %v, %w : vector<4xf32>
    vector.store %s, %out[%tx] : memref<256xf32>, vector<4xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %one = arith.constant 1.0 : f32
    memref.store %one, %out[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}
