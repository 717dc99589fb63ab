// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' -split-input-file | FileCheck %s
// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v3" threads=2 strict=true}' -split-input-file | FileCheck %s --check-prefix=AVX2
// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64" threads=2 strict=true}' -split-input-file | FileCheck %s --check-prefix=SSE

// One rule serves every vector width: the micro tile comes from the target's registers (8x32 in
// 16 of 32 zmm on AVX-512, 6x16 in 12 of 16 ymm on AVX2, 6x8 in xmm on SSE2).
// AVX2-LABEL: func.func private @matmul_packed
// AVX2-SAME: relax.schedule = ["matmul-packed-6x16"]
// AVX2: scf.for {{.*}} -> (vector<6x16xf32>)
// AVX2-NOT: vector<32xf32>
// (@matmul_rows_shared_b below: B's column blocks on AVX2, with the rows 6 does not divide:
// the 510 rows of whole tiles, then the last 2 in one 2-row tile, 2 panels wide.)
// AVX2-LABEL: func.func private @matmul_rows_shared_b
// AVX2-SAME: relax.schedule = ["matmul-rows-6x16+2x32"]
// AVX2: scf.forall (%{{.+}}) in (2) {{.*}} -> (tensor<512x64x16xf32>)
// AVX2: scf.for %{{.+}} = %c0 to %c32 step %c8 {{.*}} -> (tensor<512x32x16xf32>)
// AVX2: scf.for %{{.+}} = %c0 to %c510 step %c6 {{.*}} -> (tensor<510x8x16xf32>)
// AVX2: scf.for {{.*}} -> (vector<6x16xf32>)
// AVX2: scf.for %{{.+}} = %c0 to %c8 step %c2 {{.*}} -> (tensor<2x8x16xf32>)
// AVX2: scf.for {{.*}} -> (vector<2x2x16xf32>)
// AVX2-LABEL: func.func private @gemv
// SSE-LABEL: func.func private @matmul_packed
// SSE-SAME: relax.schedule = ["matmul-packed-6x8"]
// SSE: scf.for {{.*}} -> (vector<6x8xf32>)
// SSE-NOT: vector<16xf32>
// SSE-LABEL: func.func private @gemv

// The data-tiling route (the rule's choice when K exceeds one K block or B the cache; forced
// here by the `matmul.route` knob): A and B are packed into 8-row and 32-column panels by
// vectorized loops (split across threads or not, depending on the parallel runtime's cost), the
// packed product is tiled with the N/K/M cache loops inside one scf.forall (2 threads), each
// 8x32 register tile accumulates in vectors (8 outer products of a 32-wide B row per k), and
// the result is unpacked 8x32 at a time.
// CHECK-LABEL: func.func private @matmul_packed
// CHECK-SAME: relax.schedule = ["matmul-packed-8x32"]
// CHECK-NOT: linalg.generic
// CHECK: %[[APACK:.+]] = {{scf\.for(all)?}} {{.*}} -> (tensor<64x512x8xf32>)
// CHECK: vector.transfer_read %{{.+}} : tensor<512x512xf32>, vector<8x16xf32>
// CHECK: vector.shuffle
// CHECK: %[[BPACK:.+]] = {{scf\.for(all)?}} {{.*}} -> (tensor<16x512x32xf32>)
// CHECK: vector.transfer_read %{{.+}} : tensor<512x512xf32>, vector<16x32xf32>
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: %[[ACC:.+]] = scf.for {{.*}} iter_args(%{{.+}} = %{{.+}}) -> (vector<8x32xf32>)
// CHECK: %[[AROW:.+]] = vector.transfer_read %[[APACK]]{{.*}} vector<8xf32>
// CHECK: %[[BROW:.+]] = vector.transfer_read %[[BPACK]]{{.*}} vector<32xf32>
// CHECK-COUNT-8: vector.outerproduct %[[BROW]], %{{.+}}, %{{.+}} {kind = #vector.kind<add>} : vector<32xf32>, f32
// CHECK: vector.transfer_write %{{.+}} : vector<8x32xf32>, tensor<{{256|512}}x512xf32>
// CHECK-NOT: linalg.unpack
// CHECK: return
func.func private @matmul_packed(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>, %c: tensor<512x512xf32>) -> tensor<512x512xf32> attributes {relax.prim_func, relax.schedule_knobs = "{\22matmul.route\22: \22packed\22}"} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<512x512xf32>) -> tensor<512x512xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<512x512xf32>, tensor<512x512xf32>) outs(%fill : tensor<512x512xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<512x512xf32>
  return %r : tensor<512x512xf32>
}

// -----

// The same product without the knob takes the rows route (K fits one K block, B the cache):
// A is read in place by 8-row tiles over the whole K, only B is packed, and the two threads
// split the rows; each tile's accumulators are loaded and stored once. B (1 MB) fits the
// target's L2, so each thread packs its own copy inside the thread loop. The pack steps along
// K outside the 16 panels: each step reads 16 rows of B [K, N] along their length (lines the
// prefetchers follow) instead of one line of each row, a page apart, per panel.
// CHECK-LABEL: func.func private @matmul_rows
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+1x128"]
// CHECK-NOT: tensor<64x512x8xf32>
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK-NOT: scf.forall
// CHECK: %[[BPACK:.+]] = scf.for %[[K:.+]] = %c0 to %c512 step %c16 {{.*}} -> (tensor<16x512x32xf32>)
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %c16 step %c1
// CHECK: vector.transfer_read %arg1[%[[K]], %{{.+}}]{{.*}} : tensor<512x512xf32>, vector<16x32xf32>
// CHECK-NOT: scf.forall
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %arg0{{.*}} : tensor<512x512xf32>, vector<8x1xf32>
// CHECK: vector.transfer_read %[[BPACK]]{{.*}} vector<32xf32>
// CHECK-COUNT-8: vector.outerproduct
// The loop over B's column blocks asks for the next block's prefetch (lowering/prefetch.py).
// CHECK: } {relax.prefetch_next_block}
func.func private @matmul_rows(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>, %c: tensor<512x512xf32>) -> tensor<512x512xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<512x512xf32>) -> tensor<512x512xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<512x512xf32>, tensor<512x512xf32>) outs(%fill : tensor<512x512xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<512x512xf32>
  return %r : tensor<512x512xf32>
}

// -----

// A B beyond the L2 (2 MB) is packed once, the threads taking half of its panels each, and
// then each thread computes every row over its half of the panels (more row tiles than panels:
// with B in column blocks, A is read once per block either way, and each thread streams half
// of B instead of all of it). A thread's panels go in column blocks of a quarter of the L2 (1
// MB when the target names none): 4 panels of 512 x 32 (8 of 512 x 16 on AVX2), which every
// row tile reads from L2 before the next block. Rows that MR does not divide (on AVX2, 2 of
// 512) run after the full tiles of each block, one at a time across the block's panels.
// CHECK-LABEL: func.func private @matmul_rows_shared_b
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+1x128"]
// CHECK: %[[BPACK:.+]] = scf.forall (%{{.+}}) in (2) {{.*}} -> (tensor<32x512x32xf32>)
// CHECK: scf.forall (%{{.+}}) in (2) {{.*}} -> (tensor<512x32x32xf32>)
// CHECK: scf.for %{{.+}} = %c0 to %c16 step %c4 {{.*}} -> (tensor<512x16x32xf32>)
// CHECK-NEXT: tensor.extract_slice
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %c512 step %c8 {{.*}} -> (tensor<512x4x32xf32>)
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: vector.transfer_read %[[BPACK]]{{.*}} vector<32xf32>
func.func private @matmul_rows_shared_b(%a: tensor<512x512xf32>, %b: tensor<512x1024xf32>, %c: tensor<512x1024xf32>) -> tensor<512x1024xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<512x1024xf32>) -> tensor<512x1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<512x512xf32>, tensor<512x1024xf32>) outs(%fill : tensor<512x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<512x1024xf32>
  return %r : tensor<512x1024xf32>
}

// -----

// A K past one K block (1536) still takes the rows route: a 1536 x 32 panel of B (192 KB) fits
// half of L2, so every register tile runs the whole K and C is written once. With more column
// panels (32) than row tiles (8) and a B (6 MB) beyond L2, the threads split B's panels, and
// each thread's 16 panels (3 MB) go in column blocks too (one panel each: two would pass a
// quarter of L2).
// CHECK-LABEL: func.func private @matmul_rows_deep_k
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+1x32"]
// CHECK: scf.forall (%{{.+}}) in (2) {{.*}} -> (tensor<32x1536x32xf32>)
// CHECK: scf.forall (%{{.+}}) in (2) {{.*}} -> (tensor<64x32x32xf32>)
// CHECK: scf.for %{{.+}} = %c0 to %c16 step %c1 {{.*}} -> (tensor<64x16x32xf32>)
// CHECK: scf.for %{{.+}} = %c0 to %c64 step %c8 {{.*}} -> (tensor<64x1x32xf32>)
// CHECK: scf.for %{{.+}} = %c0 to %c1536 step %c1 {{.*}} -> (vector<8x32xf32>)
func.func private @matmul_rows_deep_k(%a: tensor<64x1536xf32>, %b: tensor<1536x1024xf32>, %c: tensor<64x1024xf32>) -> tensor<64x1024xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<64x1536xf32>, tensor<1536x1024xf32>) outs(%fill : tensor<64x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<64x1024xf32>
  return %r : tensor<64x1024xf32>
}

// -----

// Batch-1 GEMV: no packing, no threads (too little work); a 1x128 register tile keeps 8 zmm
// accumulators busy while K streams by.
// CHECK-LABEL: func.func private @gemv
// CHECK-SAME: relax.schedule = ["matmul-small-1x128"]
// CHECK-NOT: scf.forall (
// CHECK-NOT: linalg.pack
// CHECK: scf.for {{.*}} -> (vector<128xf32>)
// CHECK: %[[ROW:.+]] = vector.transfer_read %{{.+}} : tensor<784x128xf32>, vector<128xf32>
// CHECK: vector.outerproduct %[[ROW]], %{{.+}}, %{{.+}} {kind = #vector.kind<add>} : vector<128xf32>, f32
// CHECK: vector.transfer_write %{{.+}} : vector<128xf32>, tensor<1x128xf32>
func.func private @gemv(%a: tensor<1x784xf32>, %b: tensor<784x128xf32>, %c: tensor<1x128xf32>) -> tensor<1x128xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<1x128xf32>) -> tensor<1x128xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<1x784xf32>, tensor<784x128xf32>) outs(%fill : tensor<1x128xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x128xf32>
  return %r : tensor<1x128xf32>
}

// -----

// A weight packed ahead of time (`matmul.pack_weight`) reaches the kernel as [N/32, K, 32]
// panels behind a `relax.prepacked` unpack: the B pack folds away and the micro-kernel reads the
// argument directly; the rows route reads A in place, so nothing is packed at run time.
// CHECK-LABEL: func.func private @dense_prepacked
// CHECK-SAME: (%[[A:.+]]: tensor<64x48xf32>, %[[W:.+]]: tensor<3x48x32xf32>, %{{.+}}: tensor<64x96xf32>)
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+1x32"]
// CHECK-NOT: linalg.unpack
// CHECK-NOT: linalg.pack
// CHECK: vector.transfer_read %[[A]][{{.*}}]{{.*}} : tensor<64x48xf32>, vector<8x1xf32>
// CHECK: vector.transfer_read %[[W]][{{.*}}]{{.*}} : tensor<3x48x32xf32>, vector<32xf32>
// CHECK: vector.outerproduct
func.func private @dense_prepacked(%arg0: tensor<64x48xf32>, %arg1: tensor<3x48x32xf32>, %arg2: tensor<64x96xf32>) -> tensor<64x96xf32> attributes {relax.prim_func} {
  %0 = tensor.empty() : tensor<96x48xf32>
  %unpack = linalg.unpack %arg1 inner_dims_pos = [0] inner_tiles = [32] into %0 {relax.prepacked} : tensor<3x48x32xf32> -> tensor<96x48xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %1 = linalg.fill ins(%cst : f32) outs(%arg2 : tensor<64x96xf32>) -> tensor<64x96xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %unpack : tensor<64x48xf32>, tensor<96x48xf32>) outs(%1 : tensor<64x96xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %3 = arith.mulf %in, %in_0 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  } -> tensor<64x96xf32>
  return %2 : tensor<64x96xf32>
}

// -----

// Dynamic rows get a schedule too: peeled 8-row tiles, behind a run-time test of the row count
// with 2 threads; both copies run the rows past the 8-row tiles in parts of 4, 2 and 1 (the
// parallel one in each thread's share; symbolic-matmul.mlir has the details).
// CHECK-LABEL: func.func private @dynamic_rows
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+4x32+2x32+1x32", "matmul-rows-8x32+4x32+2x32+1x32"]
// CHECK-NOT: linalg.generic
// CHECK: scf.if
func.func private @dynamic_rows(%a: tensor<?x64xf32>, %b: tensor<32x64xf32>, %c: tensor<?x32xf32>) -> tensor<?x32xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<?x32xf32>) -> tensor<?x32xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<?x64xf32>, tensor<32x64xf32>) outs(%fill : tensor<?x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}
