// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v3" threads=1 strict=true}' | FileCheck %s

// A row max and an exp over rows of symbolic length (softmax over a symbolic sequence), on
// 8-lane vectors. The reduction streams whole vectors with its 4 x 8 partial maxima in registers,
// then one masked partial step; the exp goes by whole 32-lane steps, then one masked partial
// step. Masked at every step, the partial maxima went through memory each time, and each step
// ended in a masked store, microcoded on AVX2 (BERT-base's softmax at n = 256: 3.3x slower than
// its static build).
// CHECK-LABEL: func.func private @rows
// CHECK-SAME: relax.schedule = ["reduction-inner-4x8", "elementwise-32-peeled"]
// CHECK: %[[WHOLE:.+]] = scf.for %{{.+}} = %c0 to %{{.+}} step %c8 iter_args(%{{.+}} = %{{.+}}) -> (vector<4x8xf32>)
// CHECK-NOT: vector.create_mask
// CHECK: arith.maximumf {{.*}} : vector<4x8xf32>
// CHECK: scf.yield %{{.+}} : vector<4x8xf32>
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c8
// CHECK: vector.create_mask %c4, %{{.+}} : vector<4x8xi1>
// CHECK: vector.reduction <maximumf>
// CHECK: scf.for %{{.+}} = %c0 to %c4 step %c1
// CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c32
// CHECK-NOT: vector.create_mask
// CHECK: vector.transfer_write {{.*}} {in_bounds = [true]} : vector<32xf32>, tensor<1x32xf32>
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c32
// CHECK: vector.create_mask %c1, %{{.+}} : vector<1x32xi1>
// CHECK: return
func.func private @rows(%x: tensor<4x?xf32>, %out: tensor<4x?xf32>) -> tensor<4x?xf32> attributes {relax.prim_func} {
  %low = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%low : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x?xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %m : tensor<4x?xf32>, tensor<4xf32>) outs(%out : tensor<4x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<4x?xf32>
  return %y : tensor<4x?xf32>
}
