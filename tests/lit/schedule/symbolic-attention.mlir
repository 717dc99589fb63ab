// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s

// Q @ K^T over a symbolic sequence (K^T materialized: B is [64, n], rows of B along the
// sequence): rows by 8 with a dynamic trip count, peeled; columns by 32, peeled; in the whole
// tiles the 8x32 register tile runs on A's and B's rows in place, K innermost. The partial
// column strip is masked; the remainder rows go one at a time.
// CHECK-LABEL: func.func private @scores
// CHECK-SAME: relax.schedule = ["matmul-tiles-8x32+1x32"]
// CHECK-NOT: linalg.generic
// CHECK: %[[ROWS:.+]] = tensor.dim %arg0, %c2 : tensor<1x4x?x64xf32>
// CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c8
// CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c32
// CHECK: scf.for %{{.+}} = %c0 to %c64 step %c1 iter_args(%{{.+}} = %{{.+}}) -> (vector<8x32xf32>)
// CHECK: vector.outerproduct {{.*}} : vector<8xf32>, vector<32xf32>
// CHECK: vector.create_mask {{.*}} : vector<1x8x32xi1>
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c8
// CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c1
// CHECK: scf.for %{{.+}} = %c0 to %c64 step %c1 iter_args(%{{.+}} = %{{.+}}) -> (vector<32xf32>)
// CHECK: return
func.func private @scores(%q: tensor<1x4x?x64xf32>, %kt: tensor<1x4x64x?xf32>, %out: tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%out : tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kt : tensor<1x4x?x64xf32>, tensor<1x4x64x?xf32>) outs(%fill : tensor<1x4x?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x4x?x?xf32>
  return %r : tensor<1x4x?x?xf32>
}
