// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' | FileCheck %s

// Q @ K^T over a symbolic sequence on 2 threads: the heads split across threads only from
// enough work, tested at run time on the product of the symbolic rows and columns (n x n >=
// 2^19 / (4 heads x 64) = 2048). At n = 1 the parallel region cost 4 us for 0.2 us of work.
// CHECK-LABEL: func.func private @scores
// CHECK: %[[ROWS:.+]] = tensor.dim %{{.+}}, %c2 : tensor<1x4x?x64xf32>
// CHECK: %[[COLS:.+]] = tensor.dim %{{.+}}, %c3 : tensor<1x4x64x?xf32>
// CHECK: %[[WORK:.+]] = arith.muli %[[ROWS]], %[[COLS]] : index
// CHECK: %[[MANY:.+]] = arith.cmpi sge, %[[WORK]], %c2048 : index
// CHECK: scf.if %[[MANY]]
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: } else {
// CHECK-NOT: scf.forall
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
