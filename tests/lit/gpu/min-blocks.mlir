// RUN: relaxmlir-opt %s --relax-gpu-note-min-blocks --gpu-kernel-outlining --relax-gpu-min-blocks | FileCheck %s

// Two launches; the second asks for two blocks per SM (the FMA contraction kernel sets
// relax.gpu_min_blocks). Outlining drops a launch's attributes, so the request rides on the
// function (one entry per launch, in order) and becomes the outlined kernel's register cap:
// 65536 registers / (256 threads x 2 blocks) = 128. The first kernel stays uncapped.
// CHECK-LABEL: func.func @two_kernels
// CHECK-NOT: relax.gpu_launch_min_blocks
// CHECK: gpu.launch_func @two_kernels_kernel::@two_kernels_kernel
// CHECK: gpu.launch_func @two_kernels_kernel_0::@two_kernels_kernel
// CHECK: gpu.module @two_kernels_kernel
// CHECK: gpu.func @two_kernels_kernel
// CHECK-NOT: nvvm.maxnreg
// CHECK: gpu.module @two_kernels_kernel_0
// CHECK: gpu.func @two_kernels_kernel({{.*}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>, known_grid_size = array<i32: 4, 1, 1>, nvvm.maxnreg = 128 : i32}
func.func @two_kernels(%buf: memref<1024xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %i = arith.addi %tx, %bx : index
    memref.store %one, %buf[%i] : memref<1024xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %i = arith.muli %tx, %bx : index
    memref.store %one, %buf[%i] : memref<1024xf32>
    gpu.terminator
  } {relax.gpu_min_blocks = 2 : i32}
  return
}
