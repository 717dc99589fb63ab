// RUN: relaxmlir-opt %s -split-input-file --relax-fold-constant | FileCheck %s
// RUN: relaxmlir-opt %s -split-input-file --relax-fold-constant --relax-dead-code-elimination \
// RUN:   | FileCheck %s --check-prefix=DCE

func.func private @add(%a: tensor<4xf32>, %b: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%out : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// A call_tir of constants is evaluated at compile time; one with a parameter input stays.
// CHECK-LABEL: func.func @fold
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK: %[[SUM:.+]] = "relax.constant"() {value = dense<[1.100000e+01, 2.200000e+01, 3.300000e+01, 4.400000e+01]> : tensor<4xf32>}
// CHECK: %[[OUT:.+]] = "relax.call_tir"(%[[X]], %[[SUM]]) {callee = @add
// CHECK: return %[[OUT]]
// The PrimFunc stays until dead-code elimination, which keeps it here: it is still called.
// DCE-LABEL: func.func private @add
// DCE-LABEL: func.func @fold
// DCE-NOT: "relax.constant"() {value = dense<[1.000000e+00
func.func @fold(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %a = "relax.constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %b = "relax.constant"() {value = dense<[10.0, 20.0, 30.0, 40.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "relax.call_tir"(%a, %b) {callee = @add} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "relax.call_tir"(%x, %0) {callee = @add} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
