// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s

// TE's grouped NCHW convolution (4 output channels per group: ResNeXt-50's first stage, which no
// channel block holds) reads its padded image at channel `(f floordiv 4) * 4 + c`. Raised to an
// operand (`gather.raise_window_reads`), the filter loop is split into (group, filter in group)
// loops and every operand axis read at `4 * group + c` into [groups, 4] views
// (`gather.split_group_loops`): the conv rule takes it, its register tile runs along the
// filters in a group (which share one image row: read once per tap as vector<4x8>, broadcast
// to the 4 filters) instead of naive loops over a computed channel.
// CHECK-LABEL: func.func private @conv2d
// CHECK-SAME: relax.schedule = ["elementwise-8", "conv-4x4x8"]
// CHECK: %[[W:.+]] = tensor.expand_shape %arg1 {{\[}}[0, 1], [2], [3], [4]] output_shape [4, 4, 4, 3, 3] : tensor<16x4x3x3xf32> into tensor<4x4x4x3x3xf32>
// CHECK: %[[X:.+]] = tensor.expand_shape %{{.+}} {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 4, 4, 10, 10] : tensor<1x16x10x10xf32> into tensor<1x4x4x10x10xf32>
// CHECK: %[[O:.+]] = tensor.expand_shape %arg2 {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 4, 4, 8, 8]
// CHECK: scf.for %[[G:.+]] = %c0 to %c4 step %c1
// CHECK: vector.transfer_read %[[W]][%[[G]], %c0, {{.+}} : tensor<4x4x4x3x3xf32>, vector<4xf32>
// CHECK: %[[ROW:.+]] = vector.transfer_read %[[X]][%c0, %[[G]], {{.+}} : tensor<1x4x4x10x10xf32>, vector<4x8xf32>
// CHECK: vector.broadcast %[[ROW]] : vector<4x8xf32> to vector<4x4x8xf32>
// CHECK: math.fma
// CHECK: %[[DONE:.+]] = tensor.insert_slice %{{.+}} into %[[O]]
// CHECK: tensor.collapse_shape %[[DONE]] {{\[}}[0], [1, 2], [3], [4]] : tensor<1x4x4x8x8xf32> into tensor<1x16x8x8xf32>

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
func.func private @conv2d(%arg0: tensor<1x16x8x8xf32>, %arg1: tensor<16x4x3x3xf32>, %arg2: tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32> attributes {relax.prim_func} {
  %0 = tensor.empty() : tensor<1x16x10x10xf32>
  %1 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%0 : tensor<1x16x10x10xf32>) {
  ^bb0(%out: f32):
    %4 = linalg.index 1 : index
    %5 = linalg.index 0 : index
    %6 = linalg.index 3 : index
    %7 = linalg.index 2 : index
    %8 = arith.index_cast %7 : index to i32
    %c1_i32 = arith.constant 1 : i32
    %9 = arith.cmpi sge, %8, %c1_i32 : i32
    %c9_i32 = arith.constant 9 : i32
    %10 = arith.cmpi slt, %8, %c9_i32 : i32
    %11 = arith.andi %9, %10 : i1
    %12 = arith.index_cast %6 : index to i32
    %c1_i32_0 = arith.constant 1 : i32
    %13 = arith.cmpi sge, %12, %c1_i32_0 : i32
    %14 = arith.andi %11, %13 : i1
    %c9_i32_1 = arith.constant 9 : i32
    %15 = arith.cmpi slt, %12, %c9_i32_1 : i32
    %16 = arith.andi %14, %15 : i1
    %17 = scf.if %16 -> (f32) {
      %c1 = arith.constant 1 : index
      %18 = arith.subi %7, %c1 : index
      %c1_2 = arith.constant 1 : index
      %19 = arith.subi %6, %c1_2 : index
      %extracted = tensor.extract %arg0[%5, %4, %18, %19] : tensor<1x16x8x8xf32>
      scf.yield %extracted : f32
    } else {
      %cst_2 = arith.constant 0.000000e+00 : f32
      scf.yield %cst_2 : f32
    }
    linalg.yield %17 : f32
  } -> tensor<1x16x10x10xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %2 = linalg.fill ins(%cst : f32) outs(%arg2 : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %3 = linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%arg1 : tensor<16x4x3x3xf32>) outs(%2 : tensor<1x16x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %4 = linalg.index 6 : index
    %5 = linalg.index 3 : index
    %6 = linalg.index 5 : index
    %7 = linalg.index 2 : index
    %8 = linalg.index 4 : index
    %9 = linalg.index 1 : index
    %10 = linalg.index 0 : index
    %c4 = arith.constant 4 : index
    %11 = arith.floordivsi %9, %c4 : index
    %c4_0 = arith.constant 4 : index
    %12 = arith.muli %11, %c4_0 : index
    %13 = arith.addi %12, %8 : index
    %c1 = arith.constant 1 : index
    %14 = arith.muli %7, %c1 : index
    %c1_1 = arith.constant 1 : index
    %15 = arith.muli %6, %c1_1 : index
    %16 = arith.addi %14, %15 : index
    %c1_2 = arith.constant 1 : index
    %17 = arith.muli %5, %c1_2 : index
    %c1_3 = arith.constant 1 : index
    %18 = arith.muli %4, %c1_3 : index
    %19 = arith.addi %17, %18 : index
    %extracted = tensor.extract %1[%10, %13, %16, %19] : tensor<1x16x10x10xf32>
    %20 = arith.mulf %extracted, %in : f32
    %21 = arith.addf %out, %20 : f32
    linalg.yield %21 : f32
  } -> tensor<1x16x8x8xf32>
  return %3 : tensor<1x16x8x8xf32>
}
