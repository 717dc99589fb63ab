// RUN: relaxmlir-opt %s --relax-gpu-transpose | FileCheck %s

// A 50x70 -> 70x50 transpose with a cast, tagged [a, b] by relax-schedule-gpu (a: the loop along
// the input's contiguous axis, b: the output's). Blocks of 32x8 threads over 32x32 tiles (3 x 2
// of them), a 32x33 shared tile; four guarded reads along a, a barrier, four guarded writes along
// b reading the tile transposed, the payload (the cast) applied on the way out.
// CHECK-LABEL: func.func private @flip
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %c2{{.*}}, %{{.+}} = %c3{{.*}}, %{{.+}} = %c1{{.*}}) threads({{.*}}) in (%{{.+}} = %c256
// CHECK-SAME: workgroup(%[[T:.+]] : memref<32x33xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-4: memref.store %{{.+}}, %[[T]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[T]]
// CHECK: arith.truncf
// CHECK: memref.store %{{.+}}, %arg1
// CHECK: gpu.terminator
#in = affine_map<(i, j) -> (j, i)>
#out = affine_map<(i, j) -> (i, j)>
func.func private @flip(%x: memref<50x70xf32>, %y: memref<70x50xf16>) attributes {relax.prim_func} {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel"]} ins(%x : memref<50x70xf32>) outs(%y : memref<70x50xf16>) attrs = {relax.gpu_transpose = array<i64: 0, 1>} {
  ^bb0(%v: f32, %o: f16):
    %c = arith.truncf %v : f32 to f16
    linalg.yield %c : f16
  }
  return
}
