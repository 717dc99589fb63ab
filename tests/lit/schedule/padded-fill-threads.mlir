// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' | FileCheck %s

// A 3x3 convolution of a kernel argument (DenseNet-121's 128 -> 32 channels at 28x28, NCHW16c)
// on 2 threads: the fill under its padded image splits across the threads like the image (half
// of each row each), and its loops are kept rolled. Left to LLVM, each thread's 8 x 30 rows
// became 960-byte memsets unrolled into one block, whose instruction scheduling took llc 2.1 s
// (twice in DenseNet-121: 7.3 of its 21 s build at 2 threads).
// CHECK-LABEL: func.func private @padded_conv
// CHECK-SAME: relax.schedule = ["elementwise-16", "conv-
// CHECK: scf.forall (%{{.+}}) in (2) shared_outs(%{{.+}} = %{{.+}}) -> (tensor<1x8x30x30x16xf32>)
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: vector.transfer_write %cst, %{{.+}} : vector<16xf32>, tensor<1x1x1x1x16xf32>
// CHECK: } {loop_annotation = #loop_annotation}
// CHECK: } {loop_annotation = #loop_annotation}
// CHECK: } {loop_annotation = #loop_annotation}
// CHECK: tensor.parallel_insert_slice %{{.+}} into %{{.+}}[0, 0, 0, %{{.+}}, 0] [1, 8, 30, 15, 16]
#img = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d5, d2 + d6, d3 + d7, d8)>
#wgt = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d1, d5, d6, d7, d8, d4)>
#out = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d1, d2, d3, d4)>
#conv_iters = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]
func.func private @padded_conv(%x: tensor<1x8x28x28x16xf32>, %w: tensor<2x8x3x3x16x16xf32>, %out: tensor<1x2x28x28x16xf32>) -> tensor<1x2x28x28x16xf32> attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %pe = tensor.empty() : tensor<1x8x30x30x16xf32>
  %pf = linalg.fill ins(%cst : f32) outs(%pe : tensor<1x8x30x30x16xf32>) -> tensor<1x8x30x30x16xf32>
  %inner = tensor.extract_slice %pf[0, 0, 1, 1, 0] [1, 8, 28, 28, 16] [1, 1, 1, 1, 1] : tensor<1x8x30x30x16xf32> to tensor<1x8x28x28x16xf32>
  %copied = linalg.copy ins(%x : tensor<1x8x28x28x16xf32>) outs(%inner : tensor<1x8x28x28x16xf32>) -> tensor<1x8x28x28x16xf32>
  %padded = tensor.insert_slice %copied into %pf[0, 0, 1, 1, 0] [1, 8, 28, 28, 16] [1, 1, 1, 1, 1] : tensor<1x8x28x28x16xf32> into tensor<1x8x30x30x16xf32>
  %zero = linalg.fill ins(%cst : f32) outs(%out : tensor<1x2x28x28x16xf32>) -> tensor<1x2x28x28x16xf32>
  %conv = linalg.generic {indexing_maps = [#img, #wgt, #out], iterator_types = #conv_iters} ins(%padded, %w : tensor<1x8x30x30x16xf32>, tensor<2x8x3x3x16x16xf32>) outs(%zero : tensor<1x2x28x28x16xf32>) {
  ^bb0(%in: f32, %k: f32, %o: f32):
    %m = arith.mulf %in, %k : f32
    %a = arith.addf %o, %m : f32
    linalg.yield %a : f32
  } -> tensor<1x2x28x28x16xf32>
  return %conv : tensor<1x2x28x28x16xf32>
}
