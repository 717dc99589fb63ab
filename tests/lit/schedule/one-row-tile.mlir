// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' -split-input-file | FileCheck %s

// Exactly one full row tile (8 rows on AVX-512: a batch of 8 through a model's weights) over
// 4 MB of prepacked weights: B's 32 panels go in blocks of two and the block loop is marked
// for `relax-prefetch-next-block`, which fetches the next block while this one is read (one
// stream of B, one panel per step, had no blocks and ran 1.35-1.5x slower).
// CHECK-LABEL: func.func private @batch8
// CHECK: scf.for %{{.+}} = %c0 to %c32 step %c2
// CHECK: scf.for %{{.+}} = %c0 to %c1024 step %c1 {{.*}} -> (vector<8x32xf32>)
// CHECK: } {relax.prefetch_next_block}
func.func private @batch8(%arg0: tensor<8x1024xf32>, %arg1: tensor<32x1024x32xf32>, %arg2: tensor<8x1024xf32>) -> tensor<8x1024xf32> attributes {relax.prim_func} {
  %0 = tensor.empty() : tensor<1024x1024xf32>
  %unpack = linalg.unpack %arg1 inner_dims_pos = [0] inner_tiles = [32] into %0 {relax.prepacked} : tensor<32x1024x32xf32> -> tensor<1024x1024xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %1 = linalg.fill ins(%cst : f32) outs(%arg2 : tensor<8x1024xf32>) -> tensor<8x1024xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %unpack : tensor<8x1024xf32>, tensor<1024x1024xf32>) outs(%1 : tensor<8x1024xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %3 = arith.mulf %in, %in_0 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  } -> tensor<8x1024xf32>
  return %2 : tensor<8x1024xf32>
}

// -----

// Seven rows run as the rest of a tile, without blocks: nothing is marked.
// CHECK-LABEL: func.func private @batch7
// CHECK-NOT: relax.prefetch_next_block
// CHECK: return
func.func private @batch7(%arg0: tensor<7x1024xf32>, %arg1: tensor<32x1024x32xf32>, %arg2: tensor<7x1024xf32>) -> tensor<7x1024xf32> attributes {relax.prim_func} {
  %0 = tensor.empty() : tensor<1024x1024xf32>
  %unpack = linalg.unpack %arg1 inner_dims_pos = [0] inner_tiles = [32] into %0 {relax.prepacked} : tensor<32x1024x32xf32> -> tensor<1024x1024xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %1 = linalg.fill ins(%cst : f32) outs(%arg2 : tensor<7x1024xf32>) -> tensor<7x1024xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %unpack : tensor<7x1024xf32>, tensor<1024x1024xf32>) outs(%1 : tensor<7x1024xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %3 = arith.mulf %in, %in_0 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  } -> tensor<7x1024xf32>
  return %2 : tensor<7x1024xf32>
}
