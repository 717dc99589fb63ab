// RUN: relaxmlir-opt %s --relax-gpu-rows | FileCheck %s

// Softmax over rows of 300 (tagged as relax-schedule-gpu leaves it, on buffers): one block per
// row (12 blocks of 256 threads). Each reduction: a strided fold from the combiner's identity,
// five xor shuffles, lane 0 of each warp writes shared memory, a barrier, every thread folds the
// 8 warp results and then the op's initial value. The exp is recomputed where the sum and the
// output read it; the intermediate buffers are never written.
// CHECK-LABEL: func.func private @softmax
// CHECK-NOT: linalg.
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %c12{{.*}}) threads({{.*}}) in (%{{.+}} = %c256
// CHECK-SAME: workgroup(%[[S:.+]] : memref<2x8xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[MAXP:.+]] = scf.for {{.*}} iter_args(%{{.+}} = %cst{{.*}})
// CHECK: arith.maximumf
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: memref.store %{{.+}}, %[[S]]
// CHECK: gpu.barrier
// CHECK: %[[MAX:.+]] = arith.maximumf %cst{{[_0-9]*}}, %{{.+}} : f32
// CHECK: scf.for
// CHECK: arith.subf %{{.+}}, %[[MAX]]
// CHECK: math.exp
// CHECK: arith.addf
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: gpu.barrier
// CHECK: %[[SUM:.+]] = arith.addf %cst{{[_0-9]*}}, %{{.+}} : f32
// CHECK: scf.for
// CHECK: math.exp
// CHECK: %[[Q:.+]] = arith.divf %{{.+}}, %[[SUM]]
// CHECK: memref.store %[[Q]], %arg1
// CHECK: gpu.terminator
// CHECK-NOT: linalg.
// CHECK: return
#full = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> (i)>
#scalar = affine_map<(i) -> ()>
#one = affine_map<(i) -> (i)>
func.func private @softmax(%x: memref<12x300xf32>, %out: memref<12x300xf32>) attributes {relax.prim_func} {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %m = memref.alloc() : memref<12xf32>
  %e = memref.alloc() : memref<12x300xf32>
  %s = memref.alloc() : memref<12xf32>
  linalg.generic {indexing_maps = [#scalar, #one], iterator_types = ["parallel"]} ins(%ninf : f32) outs(%m : memref<12xf32>) attrs = {relax.gpu_rows = array<i64: 0, 0>} {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#full, #red], iterator_types = ["parallel", "reduction"]} ins(%x : memref<12x300xf32>) outs(%m : memref<12xf32>) attrs = {relax.gpu_rows = array<i64: 1, 3>} {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.maximumf %acc, %v : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#full, #red, #full], iterator_types = ["parallel", "parallel"]} ins(%x, %m : memref<12x300xf32>, memref<12xf32>) outs(%e : memref<12x300xf32>) attrs = {relax.gpu_rows = array<i64: 2, 1>} {
  ^bb0(%v: f32, %mx: f32, %o: f32):
    %d = arith.subf %v, %mx : f32
    %ex = math.exp %d : f32
    linalg.yield %ex : f32
  }
  linalg.generic {indexing_maps = [#scalar, #one], iterator_types = ["parallel"]} ins(%zero : f32) outs(%s : memref<12xf32>) attrs = {relax.gpu_rows = array<i64: 3, 0>} {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#full, #red], iterator_types = ["parallel", "reduction"]} ins(%e : memref<12x300xf32>) outs(%s : memref<12xf32>) attrs = {relax.gpu_rows = array<i64: 4, 3>} {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %acc, %v : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#full, #red, #full], iterator_types = ["parallel", "parallel"]} ins(%e, %s : memref<12x300xf32>, memref<12xf32>) outs(%out : memref<12x300xf32>) attrs = {relax.gpu_rows = array<i64: 5, 1>, relax.gpu_rows_shape = array<i64: 1, 12, 300>} {
  ^bb0(%v: f32, %sum: f32, %o: f32):
    %q = arith.divf %v, %sum : f32
    linalg.yield %q : f32
  }
  memref.dealloc %m : memref<12xf32>
  memref.dealloc %e : memref<12x300xf32>
  memref.dealloc %s : memref<12xf32>
  return
}
