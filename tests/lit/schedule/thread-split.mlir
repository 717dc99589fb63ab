// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' -split-input-file | FileCheck %s
// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=4 strict=true}' -split-input-file | FileCheck %s --check-prefix=FOUR

// Which loop each kernel splits across threads (`thread_loop`): the outermost that gives every
// thread an equal share, so that consecutive kernels split a tensor alike and a thread reads the
// rows it wrote.

// A [rows, Q/K/V, features] -> [Q/K/V, rows, features] copy splits by rows (the matmul that
// wrote its input did), not 2:1 by Q/K/V.
// CHECK-LABEL: func.func private @qkv_rows
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: tensor.extract_slice %arg0[%{{.+}}, 0, 0] [64, 3, 256]
// CHECK: tensor.parallel_insert_slice %{{.+}} into %{{.+}}[0, %{{.+}}, 0] [3, 64, 256]
func.func private @qkv_rows(%a: tensor<128x3x256xf32>, %c: tensor<3x128x256xf32>) -> tensor<3x128x256xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : tensor<128x3x256xf32>) outs(%c : tensor<3x128x256xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<3x128x256xf32>
  return %r : tensor<3x128x256xf32>
}
// -----

// A row reduction of 32K elements (a layer norm at seq 128, d 256) runs on both threads, each
// over the rows the kernel before it wrote.
// CHECK-LABEL: func.func private @row_sums
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: tensor.parallel_insert_slice %{{.+}} into %{{.+}}[%{{.+}}] [64] [1]
func.func private @row_sums(%a: tensor<128x256xf32>, %c: tensor<128xf32>) -> tensor<128xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<128xf32>) -> tensor<128xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<128x256xf32>) outs(%f : tensor<128xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<128xf32>
  return %r : tensor<128xf32>
}
// -----

// Two matrices on four threads: the rows split, and C's unpack copies each thread's own rows
// (it split the batch of 2, leaving two threads idle and each copying rows another computed).
// FOUR-LABEL: func.func private @bmm_rows
// FOUR: scf.forall (%{{.+}}) in (4) shared_outs(%{{.+}} = %{{.+}}) -> (tensor<2x256x4x32xf32>)
// FOUR: tensor.parallel_insert_slice %{{.+}} into %{{.+}}[0, %{{.+}}, 0, 0] [2, 64, 4, 32]
// FOUR: scf.forall (%{{.+}}) in (4) shared_outs(%{{.+}} = %arg2) -> (tensor<2x256x128xf32>)
// FOUR: tensor.parallel_insert_slice %{{.+}} into %{{.+}}[0, %{{.+}}, 0] [2, 64, 128]
func.func private @bmm_rows(%a: tensor<2x256x64xf32>, %b: tensor<2x64x128xf32>, %c: tensor<2x256x128xf32>) -> tensor<2x256x128xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<2x256x128xf32>) -> tensor<2x256x128xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<2x256x64xf32>, tensor<2x64x128xf32>) outs(%f : tensor<2x256x128xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x256x128xf32>
  return %r : tensor<2x256x128xf32>
}

// -----

// A squeeze-excite block's expand (a 1x1 conv on a 1x1 map: 440 rows of 110): the two threads
// take 220 rows each, and the reduction rule tiles each share by a row count that divides it
// (5, not the 8 that divide 440): with 8 the last 4 rows of each share were a dynamic tile,
// which failed to vectorize, and the op was left to scalar loops (RegNetY-400MF).
// CHECK-LABEL: func.func private @gemv_rows_per_thread
// CHECK-SAME: relax.schedule = ["reduction-inner-5x16"]
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: scf.for %{{.+}} = %c0 to %c220 step %c5
// CHECK: vector<5x16xf32>
func.func private @gemv_rows_per_thread(%a: tensor<440x110xf32>, %x: tensor<110xf32>, %o: tensor<440xf32>) -> tensor<440xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%o : tensor<440xf32>) -> tensor<440xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%a, %x : tensor<440x110xf32>, tensor<110xf32>) outs(%fill : tensor<440xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<440xf32>
  return %r : tensor<440xf32>
}

// -----

// A squeeze-excite mean in NCHW8c ([13 blocks, 28 * 28 pixels, 8 lanes] -> [13, 8]): the
// threads split the 13 blocks (7 + 6), not the 8 lanes, which an even share preferred: both
// threads then wrote the same lines in half vectors, 7x slower than one thread (RegNetY).
// CHECK-LABEL: func.func private @mean_of_blocks
// CHECK: scf.forall (%{{.+}}) in (2) {{.*}} -> (tensor<13x8xf32>)
// CHECK: tensor.extract_slice %{{.+}}[%{{.+}}, 0] [%{{.+}}, 8] [1, 1] : tensor<13x8xf32> to tensor<?x8xf32>
func.func private @mean_of_blocks(%a: tensor<13x784x8xf32>, %o: tensor<13x8xf32>) -> tensor<13x8xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%o : tensor<13x8xf32>) -> tensor<13x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a : tensor<13x784x8xf32>) outs(%fill : tensor<13x8xf32>) {
  ^bb0(%p: f32, %acc: f32):
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<13x8xf32>
  return %r : tensor<13x8xf32>
}

// -----

// One row through a 1 MB B (an LSTM's recurrent step) is bound by streaming B: the columns split
// across the threads, each streaming half of B, although its 262K MACs are below the work that
// pays for a parallel region at full FMA speed.
// CHECK-LABEL: func.func private @gemv_1mb
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: tensor.parallel_insert_slice %{{.+}} into %{{.+}}[0, %{{.+}}] [1, 512] [1, 1]
func.func private @gemv_1mb(%a: tensor<1x256xf32>, %b: tensor<256x1024xf32>, %c: tensor<1x1024xf32>) -> tensor<1x1024xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<1x1024xf32>) -> tensor<1x1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<1x256xf32>, tensor<256x1024xf32>) outs(%f : tensor<1x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x1024xf32>
  return %r : tensor<1x1024xf32>
}

// -----

// Through 256 KB it stays on one thread (a parallel region cost more than the half it saves).
// CHECK-LABEL: func.func private @gemv_256kb
// CHECK-NOT: scf.forall
// CHECK: return
func.func private @gemv_256kb(%a: tensor<1x256xf32>, %b: tensor<256x256xf32>, %c: tensor<1x256xf32>) -> tensor<1x256xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<1x256xf32>) -> tensor<1x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<1x256xf32>, tensor<256x256xf32>) outs(%f : tensor<1x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x256xf32>
  return %r : tensor<1x256xf32>
}
