// RUN: relaxmlir-opt %s -split-input-file --relax-prim-func-dps | FileCheck %s

// A kernel whose result is built on tensor.empty gets it materialized into its out-argument.
// CHECK-LABEL: func.func private @result_on_empty
// CHECK-SAME: (%[[A:[^:]+]]: tensor<4xf32>, %[[OUT:[^:]+]]: tensor<4xf32>)
// CHECK: %[[SUM:.+]] = linalg.add
// CHECK: %[[RES:.+]] = bufferization.materialize_in_destination %[[SUM]] in %[[OUT]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: return %[[RES]]
func.func private @result_on_empty(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Results that already are the out-argument, and functions that are not primitive, stay.
// CHECK-LABEL: func.func private @returns_out
// CHECK-NOT: bufferization.materialize_in_destination
// CHECK: return %{{.+}}
// CHECK-LABEL: func.func @not_a_prim_func
// CHECK-NOT: bufferization.materialize_in_destination
func.func private @returns_out(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  return %out : tensor<4xf32>
}

func.func @not_a_prim_func(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
