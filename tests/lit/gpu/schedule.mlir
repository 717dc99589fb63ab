// RUN: relaxmlir-opt %s '--relax-schedule-gpu{target="cuda -arch=sm_90"}' -split-input-file | FileCheck %s

// Elementwise (Fallback): one thread per element, 256 per block along the contiguous axis, so a
// warp reads 32 consecutive floats (coalesced).
// CHECK-LABEL: func.func private @add
// CHECK-SAME: relax.gpu_block_dims = array<i64: 256, 1, 1>
// CHECK-SAME: relax.schedule = ["fallback"]
// CHECK: scf.forall (%{{.+}}, %{{.+}}) in (64, 4)
// CHECK: scf.forall (%{{.+}}, %{{.+}}) in (1, 256)
// CHECK: } {mapping = [#gpu.thread<y>, #gpu.thread<x>]}
// CHECK: } {mapping = [#gpu.block<y>, #gpu.block<x>]}
func.func private @add(%a: tensor<64x1024xf32>, %b: tensor<64x1024xf32>, %out: tensor<64x1024xf32>) -> tensor<64x1024xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %b : tensor<64x1024xf32>, tensor<64x1024xf32>) outs(%out : tensor<64x1024xf32>) -> tensor<64x1024xf32>
  return %0 : tensor<64x1024xf32>
}

// -----

// Matmul with a fused bias epilogue: the Matmul rule tags the contraction with its tile (a
// 256x256 output takes 32x32 blocks: larger ones would leave most multiprocessors idle; their
// 64 blocks of 64 threads still do, so K = 256 is split in two), its fill and its epilogue ([position, operand carrying the product]); relax-gpu-contract writes
// the kernel after bufferization (tests/lit/gpu/contract.mlir). Nothing is tiled here.
// CHECK-LABEL: func.func private @linear
// CHECK-SAME: relax.schedule = ["matmul"]
// CHECK-NOT: scf.forall
// CHECK: linalg.generic {{.*}} attrs = {relax.gpu_contract_init}
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]{{.*}} attrs = {relax.gpu_contract = "32x32/4x4", relax.gpu_contract_split = 2 : i64}
// CHECK: linalg.generic {{.*}} attrs = {relax.gpu_contract_epilogue = array<i64: 0, 0>}
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>
func.func private @linear(%x: tensor<256x256xf32>, %w: tensor<256x256xf32>, %b: tensor<256xf32>, %out: tensor<256x256xf32>) -> tensor<256x256xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x256xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<256x256xf32>) -> tensor<256x256xf32>
  %mm = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<256x256xf32>, tensor<256x256xf32>) outs(%f : tensor<256x256xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %p = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<256x256xf32>
  %r = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%mm, %b : tensor<256x256xf32>, tensor<256xf32>) outs(%out : tensor<256x256xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %s = arith.addf %v, %bias : f32
    linalg.yield %s : f32
  } -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// -----

// A single row (batch-1 linear) is a GEMV. With the matrix as [K, N]: 128 outputs per
// block, one thread each (consecutive threads read consecutive columns).
// CHECK-LABEL: func.func private @gemv
// CHECK-SAME: relax.gpu_block_dims = array<i64: 128, 1, 1>
// CHECK-SAME: relax.schedule = ["gemv"]
// CHECK: scf.forall (%{{.+}}, %{{.+}}) in (1, 8)
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func private @gemv(%x: tensor<1x512xf32>, %w: tensor<512x1024xf32>, %out: tensor<1x1024xf32>) -> tensor<1x1024xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%out : tensor<1x1024xf32>) -> tensor<1x1024xf32>
  %mm = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<1x512xf32>, tensor<512x1024xf32>) outs(%f : tensor<1x1024xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %p = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x1024xf32>
  return %mm : tensor<1x1024xf32>
}

// -----

// With the matrix as [N, K] (x @ w.T) each output is a dot product of two contiguous rows:
// the row template takes it (tagged here, written after bufferization: one block of 256
// threads per output, warp shuffles), the vector x read by every row.
// CHECK-LABEL: func.func private @gemv_rows
// CHECK-SAME: relax.gpu_block_dims = array<i64: 256, 1, 1>
// CHECK-SAME: relax.schedule = ["gemv"]
// CHECK: linalg.generic {{.*}} attrs = {relax.gpu_rows = array<i64: 0, 0>}
// CHECK: linalg.generic {{.*}} attrs = {relax.gpu_rows = array<i64: 1, 3>, relax.gpu_rows_shape = array<i64: 1, 1024, 512>}
// CHECK-NOT: scf.forall
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func private @gemv_rows(%x: tensor<1x512xf32>, %w: tensor<1024x512xf32>, %out: tensor<1x1024xf32>) -> tensor<1x1024xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%out : tensor<1x1024xf32>) -> tensor<1x1024xf32>
  %mm = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<1x512xf32>, tensor<1024x512xf32>) outs(%f : tensor<1x1024xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %p = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x1024xf32>
  return %mm : tensor<1x1024xf32>
}

// -----

// A row reduction (Reduction): one block per row (rows.py), its 256 threads fold the row
// together. Tagged [position, kind] (0 fill, 3 reduction) with the full shape on the root
// ([row axes, 512, 1000]); relax-gpu-rows writes the kernel (tests/lit/gpu/rows.mlir).
// CHECK-LABEL: func.func private @row_sum
// CHECK-SAME: relax.gpu_block_dims = array<i64: 256, 1, 1>
// CHECK-SAME: relax.schedule = ["reduction"]
// CHECK-NOT: scf.forall
// CHECK: relax.gpu_rows = array<i64: 0, 0>
// CHECK: relax.gpu_rows = array<i64: 1, 3>, relax.gpu_rows_shape = array<i64: 1, 512, 1000>
#row = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> (i)>
func.func private @row_sum(%x: tensor<512x1000xf32>, %out: tensor<512xf32>) -> tensor<512xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%out : tensor<512xf32>) -> tensor<512xf32>
  %s = linalg.generic {indexing_maps = [#row, #red], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<512x1000xf32>) outs(%f : tensor<512xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %acc, %v : f32
    linalg.yield %a : f32
  } -> tensor<512xf32>
  return %s : tensor<512xf32>
}

// -----

// Softmax's shape (GeneralReduction): an elementwise root (kind 1: full rows) fed by a row
// reduction; one block per row, 256 threads across it.
// CHECK-LABEL: func.func private @sub_max
// CHECK-SAME: relax.gpu_block_dims = array<i64: 256, 1, 1>
// CHECK-SAME: relax.schedule = ["general_reduction"]
// CHECK-NOT: scf.forall
// CHECK: relax.gpu_rows = array<i64: 1, 3>
// CHECK: relax.gpu_rows = array<i64: 2, 1>, relax.gpu_rows_shape = array<i64: 1, 128, 768>
// CHECK: math.exp
#row = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> (i)>
func.func private @sub_max(%x: tensor<128x768xf32>, %out: tensor<128x768xf32>) -> tensor<128x768xf32> attributes {relax.prim_func} {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<128xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<128xf32>) -> tensor<128xf32>
  %m = linalg.generic {indexing_maps = [#row, #red], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<128x768xf32>) outs(%f : tensor<128xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.maximumf %acc, %v : f32
    linalg.yield %a : f32
  } -> tensor<128xf32>
  %r = linalg.generic {indexing_maps = [#row, #red, #row], iterator_types = ["parallel", "parallel"]} ins(%x, %m : tensor<128x768xf32>, tensor<128xf32>) outs(%out : tensor<128x768xf32>) {
  ^bb0(%v: f32, %mx: f32, %o: f32):
    %d = arith.subf %v, %mx : f32
    %ex = math.exp %d : f32
    linalg.yield %ex : f32
  } -> tensor<128x768xf32>
  return %r : tensor<128x768xf32>
}
