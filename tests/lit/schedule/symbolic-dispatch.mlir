// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' | FileCheck %s
// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s --check-prefix=ONE

// A row softmax's max and exp over symbolic rows (a sequence `n` of 256-wide rows): the size
// is tested at run time. From enough elements (rows x 256) the parallel copy splits the rows
// across threads, below that the serial copy runs; both copies keep the same vectors.
// CHECK-LABEL: func.func private @rows
// CHECK-SAME: relax.schedule = ["reduction-inner-1x16", "elementwise-64", "reduction-inner-1x16", "elementwise-64"]
// CHECK: %[[ROWS:.+]] = tensor.dim %arg0, %c0 : tensor<?x256xf32>
// CHECK: %[[MANY:.+]] = arith.cmpi sge, %[[ROWS]], %{{.+}} : index
// CHECK: scf.if %[[MANY]] -> (tensor<?x256xf32>)
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: } else {
// CHECK-NOT: scf.forall
// CHECK: return

// One thread: no dispatch.
// ONE-LABEL: func.func private @rows
// ONE-SAME: relax.schedule = ["reduction-inner-1x16", "elementwise-64"]
// ONE-NOT: scf.if
// ONE-NOT: scf.forall
func.func private @rows(%x: tensor<?x256xf32>, %out: tensor<?x256xf32>) -> tensor<?x256xf32> attributes {relax.prim_func} {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x256xf32>
  %low = arith.constant 0xFF800000 : f32
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%low : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<?x256xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %m : tensor<?x256xf32>, tensor<?xf32>) outs(%out : tensor<?x256xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

// A linear over symbolic rows through prepacked weights with a deep K (2048: panels of
// 256 KB), on one thread: a few rows (down to one, the GEMV tile over 4 panels at a time)
// want B's column blocks in whole panel groups, too large to prefetch the next beside; from
// one 8-row tile on, the second copy runs one-panel blocks, each next one prefetched.
// ONE-LABEL: func.func private @proj
// ONE-SAME: relax.schedule = ["matmul-rows-8x32+4x32+2x32+1x32", "matmul-rows-8x32+4x64+2x128+1x128"]
// ONE: %[[ROWS:.+]] = tensor.dim %arg0, %c0 : tensor<?x2048xf32>
// ONE: %[[MANY:.+]] = arith.cmpi sge, %[[ROWS]], %c8 : index
// ONE: scf.if %[[MANY]] -> (tensor<?x256xf32>)
// ONE: } {relax.prefetch_next_block}
// ONE: } else {
// ONE-NOT: relax.prefetch_next_block
// ONE: return
func.func private @proj(%arg0: tensor<?x2048xf32>, %arg1: tensor<8x2048x32xf32>, %arg2: tensor<?x256xf32>) -> tensor<?x256xf32> attributes {relax.prim_func} {
  %0 = tensor.empty() : tensor<256x2048xf32>
  %unpack = linalg.unpack %arg1 inner_dims_pos = [0] inner_tiles = [32] into %0 {relax.prepacked} : tensor<8x2048x32xf32> -> tensor<256x2048xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %1 = linalg.fill ins(%cst : f32) outs(%arg2 : tensor<?x256xf32>) -> tensor<?x256xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %unpack : tensor<?x2048xf32>, tensor<256x2048xf32>) outs(%1 : tensor<?x256xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %3 = arith.mulf %in, %in_0 : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  } -> tensor<?x256xf32>
  return %2 : tensor<?x256xf32>
}
