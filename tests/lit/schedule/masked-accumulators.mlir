// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s

// Scores of 8-wide rows (few columns: the "small" tile of 8 rows by 16 lanes, masked to 8).
// The masked accumulators are read once before the K loop, carried in registers through it and
// written once after it: a masked store and reload per step of K are not forwarded (12 heads on
// Zen 4, one row per step: 57 -> 18 us).
// CHECK-LABEL: func.func private @scores
// CHECK-SAME: relax.schedule = ["matmul-small-8x16"]
// CHECK: %[[START:.+]] = vector.transfer_read %[[ROW:[^ ]+]][%c0, %c0, %c0], %{{[^ ]+}}, %[[MASK:[^ ]+]] {{.*}} : tensor<1x8x8xf32>, vector<1x8x16xf32>
// CHECK: %[[SUMS:.+]] = scf.for %{{.+}} = %c0 to %c64 step %c1 iter_args(%{{.+}} = %[[START]]) -> (vector<1x8x16xf32>)
// CHECK-NOT: vector.transfer_write
// CHECK: vector.mask %{{.+}} { vector.outerproduct
// CHECK-NOT: vector.transfer_write
// CHECK: scf.yield %{{.+}} : vector<1x8x16xf32>
// CHECK: vector.transfer_write %[[SUMS]], %[[ROW]][%c0, %c0, %c0], %[[MASK]] {{.*}} : vector<1x8x16xf32>, tensor<1x8x8xf32>
func.func private @scores(%q: tensor<1x2x8x64xf32>, %kt: tensor<1x2x64x8xf32>, %out: tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%out : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kt : tensor<1x2x8x64xf32>, tensor<1x2x64x8xf32>) outs(%fill : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x2x8x8xf32>
  return %r : tensor<1x2x8x8xf32>
}
