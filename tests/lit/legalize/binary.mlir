// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// Broadcasting reads the smaller operand through its own indexing map.
// CHECK-DAG: #[[ROW:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @add_broadcast
// CHECK-SAME: (%[[A:[^:]+]]: tensor<3x4xf32>, %[[B:[^:]+]]: tensor<4xf32>)
// CHECK-NOT: "relax.add"
// CHECK: "relax.call_tir"(%[[A]], %[[B]]) {callee = @add}
// CHECK: func.func private @add(
// CHECK: linalg.generic {indexing_maps = [#{{.+}}, #[[ROW]], #{{.+}}]
// CHECK: arith.addf
func.func @add_broadcast(%a: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> attributes {relax.function} {
  %0 = "relax.add"(%a, %b) : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// A one-element constant operand is folded into the kernel as a scalar (TVM's _binary).
// CHECK-LABEL: func.func @scalar_operand
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK: "relax.call_tir"(%[[X]]) {callee = @multiply}
// CHECK: func.func private @multiply(%{{.+}}: tensor<4xf32>, %{{.+}}: tensor<4xf32>)
// CHECK: %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK: arith.mulf %{{.+}}, %[[TWO]]
func.func @scalar_operand(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %c = "relax.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "relax.multiply"(%x, %c) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Comparisons produce bool tensors, stored as bytes (i8).
// CHECK-LABEL: func.func @less_then_where
// CHECK: %[[MASK:.+]] = "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @less} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi8>
// CHECK: "relax.call_tir"(%[[MASK]], %{{.+}}, %{{.+}}) {callee = @where}
// CHECK: func.func private @less(
// CHECK: arith.cmpf olt
// CHECK: arith.extui %{{.+}} : i1 to i8
// CHECK: func.func private @where(
// CHECK: arith.select
func.func @less_then_where(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %m = "relax.less"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi8>
  %0 = "relax.where"(%m, %a, %b) : (tensor<4xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
