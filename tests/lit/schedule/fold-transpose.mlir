// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s

// A decode step's scores: q (one row per head) times K^T, with the transpose of the KV cache in
// the same kernel (relax-fuse-ops puts it there for contractions of few rows). The transpose is
// folded into the contraction's map (`normalize.fold_transposes`): the product reads K's rows
// in place, dot products along the head size (the `dot` route), and no K^T is written.
// CHECK-LABEL: func.func private @decode_scores
// CHECK-SAME: relax.schedule = ["matmul-dot-1x16"]
// CHECK-NOT: tensor.empty
// CHECK-NOT: tensor<4x16x?xf32>
// CHECK: %[[N:.+]] = tensor.dim %arg1, %c1
// CHECK: scf.for %[[H:.+]] = %c0 to %c4
// CHECK: scf.for %[[J:.+]] = %c0 to %[[N]]
// CHECK: vector.transfer_read %arg1[%[[H]], %[[J]], %c0]{{.*}} : tensor<4x?x16xf32>, vector<16xf32>
// CHECK: math.fma
// CHECK: vector.reduction <add>
func.func private @decode_scores(%q: tensor<4x1x16xf32>, %k: tensor<4x?x16xf32>, %out: tensor<4x1x?xf32>) -> tensor<4x1x?xf32> attributes {relax.prim_func} {
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %k, %c1 : tensor<4x?x16xf32>
  %e = tensor.empty(%n) : tensor<4x16x?xf32>
  %kt = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<4x?x16xf32>) outs(%e : tensor<4x16x?xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<4x16x?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<4x1x?xf32>) -> tensor<4x1x?xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kt : tensor<4x1x16xf32>, tensor<4x16x?xf32>) outs(%init : tensor<4x1x?xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<4x1x?xf32>
  return %s : tensor<4x1x?xf32>
}
