// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s
// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' | FileCheck %s --check-prefix=THREADS

// A dense layer with symbolic rows (`?`, a batch `n`): the rows split into parts
// (transform.structured.continuous_tile_sizes, sizes computed from n at run time): n - n mod 8
// rows, then 4 rows or none, 2 or none, and the last row or none. Each part is tiled with a static tile and a dynamic
// trip count, and peeled (its remainder never runs). The 8-row tiles run the 8x32 register tile
// (8 accumulator rows of one 32-wide B panel per k) straight on A's rows; the 4-row part one
// 4 x 64 tile, the 2-row part 2 x 128, the last row 1 x 128: a batch of 7 passes over B three
// times, not seven (one B vector per FMA when row by row).
// CHECK-LABEL: func.func private @dense_rows
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+4x64+2x128+1x128"]
// CHECK-NOT: linalg.generic
// CHECK: tensor.dim %arg0, %c0 : tensor<?x256xf32>
// CHECK: %[[EIGHTS:[a-z0-9_]+]] = affine.apply #{{.+}}()[%{{[a-z0-9_]+}}]{{$}}
// CHECK: scf.for %{{.+}} = %c0 to %[[EIGHTS]] step %c8 iter_args(%{{.+}} = %{{.+}}) -> (tensor<?x4x32xf32>)
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: vector.outerproduct {{.*}} : vector<32xf32>, f32
// CHECK: %[[FOURS:[a-z0-9_]+]] = affine.apply #{{.+}}()[%{{[a-z0-9_]+}}]{{$}}
// CHECK: scf.for %{{.+}} = %c0 to %[[FOURS]] step %c4 iter_args(%{{.+}} = %{{.+}}) -> (tensor<?x4x32xf32>)
// CHECK: scf.for {{.*}} -> (vector<4x2x32xf32>)
// CHECK: %[[TWOS:[a-z0-9_]+]] = affine.apply #{{.+}}()[%{{[a-z0-9_]+}}]{{$}}
// CHECK: scf.for %{{.+}} = %c0 to %[[TWOS]] step %c2 iter_args(%{{.+}} = %{{.+}}) -> (tensor<?x4x32xf32>)
// CHECK: scf.for {{.*}} -> (vector<2x4x32xf32>)
// CHECK: scf.for {{.*}} -> (vector<4x32xf32>)
// CHECK: return

// With 2 threads the row count is tested at run time: from 16 rows (16 x 128 x 256 MACs, the
// parallel threshold) the rows are split across threads, below that the serial copy runs.
// Each thread splits its share of the rows into the same parts, their sizes computed in the
// thread (a share of 12 rows: one 8-row tile and one 4-row tile, not 4 rows one by one).
// THREADS-LABEL: func.func private @dense_rows
// THREADS-SAME: relax.schedule = ["matmul-rows-8x32+4x64+2x128+1x128", "matmul-rows-8x32+4x64+2x128+1x128"]
// THREADS: %[[MANY:.+]] = arith.cmpi sge, %{{.+}}, %c16 : index
// THREADS: scf.if %[[MANY]] -> (tensor<?x128xf32>)
// THREADS: scf.forall (%{{.+}}) in (2)
// THREADS: scf.for {{.*}} -> (vector<8x32xf32>)
// THREADS: scf.for {{.*}} -> (vector<4x2x32xf32>)
// THREADS: scf.for {{.*}} -> (vector<2x4x32xf32>)
// THREADS: } else {
// THREADS-NOT: scf.forall
// THREADS: scf.for {{.*}} -> (vector<8x32xf32>)
// THREADS: return
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func private @dense_rows(%x: tensor<?x256xf32>, %w: tensor<128x256xf32>, %out: tensor<?x128xf32>) -> tensor<?x128xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.000000e+00 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<?x128xf32>) -> tensor<?x128xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<?x256xf32>, tensor<128x256xf32>) outs(%init : tensor<?x128xf32>) {
  ^bb0(%in: f32, %in_w: f32, %acc: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x128xf32>
  return %r : tensor<?x128xf32>
}
