// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// Batched matmul with a broadcast batch: the batch-1 operand reads batch index 0.
// CHECK-DAG: #[[LHS:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[RHS:.+]] = affine_map<(d0, d1, d2, d3) -> (0, d3, d2)>
// CHECK-LABEL: func.func @matmul_broadcast_batch
// CHECK: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @[[FN:[a-z_0-9]+]]} : (tensor<2x3x4xf32>, tensor<1x4x5xf32>) -> tensor<2x3x5xf32>
// CHECK: func.func private @[[FN]](
// CHECK: linalg.fill
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
func.func @matmul_broadcast_batch(%a: tensor<2x3x4xf32>, %b: tensor<1x4x5xf32>) -> tensor<2x3x5xf32> attributes {relax.function} {
  %0 = "relax.matmul"(%a, %b) {out_dtype = "float32"} : (tensor<2x3x4xf32>, tensor<1x4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}
