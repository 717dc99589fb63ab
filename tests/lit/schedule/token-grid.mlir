// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' -split-input-file | FileCheck %s
// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v3" threads=1 strict=true}' -split-input-file | FileCheck %s --check-prefix=AVX2

// A linear layer over a grid of tokens (ConvNeXt's and Swin's [H, W, C] stages): the rows
// are two M loops. Rows of 14 fill one 8-row register tile and leave 6 rows, which ran one
// at a time; merged into 196 rows, 24 full tiles leave 4, one 4-row tile. Here 14 x 14
// tokens, 64 -> 64.
// CHECK-LABEL: func.func private @token_grid
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+4x64"]
// CHECK: tensor.collapse_shape %arg0 {{.*}} into tensor<196x64xf32>
// CHECK: scf.for %{{.+}} = %c0 to %c192 step %c8
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: scf.for {{.*}} -> (vector<4x2x32xf32>)
// CHECK: tensor.expand_shape {{.*}} into tensor<14x14x64xf32>
// AVX2-LABEL: func.func private @token_grid
// AVX2: tensor.collapse_shape %arg0 {{.*}} into tensor<196x64xf32>
// AVX2: scf.for %{{.+}} = %c0 to %c192 step %c6
func.func private @token_grid(%a: tensor<14x14x64xf32>, %b: tensor<64x64xf32>, %c: tensor<14x14x64xf32>) -> tensor<14x14x64xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<14x14x64xf32>) -> tensor<14x14x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<14x14x64xf32>, tensor<64x64xf32>) outs(%fill : tensor<14x14x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<14x14x64xf32>
  return %r : tensor<14x14x64xf32>
}

// -----

// Rows that whole tiles fill (a batch of 8 sequences of 64 tokens) keep their two loops on
// AVX-512, where merged they tiled worse; AVX2's 6-row tiles do not divide 64, so they merge.
// CHECK-LABEL: func.func private @batch_of_sequences
// CHECK-NOT: tensor.collapse_shape %arg0
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// AVX2-LABEL: func.func private @batch_of_sequences
// AVX2: tensor.collapse_shape %arg0 {{.*}} into tensor<512x64xf32>
func.func private @batch_of_sequences(%a: tensor<8x64x64xf32>, %b: tensor<64x64xf32>, %c: tensor<8x64x64xf32>) -> tensor<8x64x64xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<8x64x64xf32>, tensor<64x64xf32>) outs(%fill : tensor<8x64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x64x64xf32>
  return %r : tensor<8x64x64xf32>
}

// -----

// An A whose rows are its columns (a batch's NCHW 1x1 convolution: the image [C, H, W] with
// the channels, K, outermost) keeps its two M loops: merged into one column, the rows route
// failed to vectorize and the op fell back to loops.
// CHECK-LABEL: func.func private @columns_of_a
// CHECK-NOT: tensor.collapse_shape %arg0
// CHECK: return
func.func private @columns_of_a(%a: tensor<24x7x7xf32>, %b: tensor<48x24xf32>, %c: tensor<7x7x48xf32>) -> tensor<7x7x48xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<7x7x48xf32>) -> tensor<7x7x48xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d3, d0, d1)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<24x7x7xf32>, tensor<48x24xf32>) outs(%fill : tensor<7x7x48xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<7x7x48xf32>
  return %r : tensor<7x7x48xf32>
}
