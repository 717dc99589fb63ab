// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops --relax-fold-constant | FileCheck %s

// A call whose inputs are all constants runs at compile time and becomes a constant; the chain
// folds through (transpose, then add), and a call with a runtime input stays.
// CHECK-LABEL: func.func @fold_chain
// CHECK-SAME: (%[[X:[^:]+]]: tensor<3x2xf32>)
// CHECK: %[[FOLDED:.+]] = "relax.constant"() {value = dense<{{\[}}[1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00], [3.000000e+00, 5.000000e+00]]> : tensor<3x2xf32>}
// CHECK-NOT: "relax.call_tir"({{.*}}%[[FOLDED]]{{.*}}) {callee = @permute_dims
// CHECK: "relax.call_tir"(%[[X]], %[[FOLDED]])
func.func @fold_chain(%x: tensor<3x2xf32>) -> tensor<3x2xf32> attributes {relax.function} {
  %c = "relax.constant"() {value = dense<[[0.0, 1.0, 2.0], [2.0, 3.0, 4.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %one = "relax.constant"() {value = dense<1.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %t = "relax.permute_dims"(%c) {axes = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %s = "relax.add"(%t, %one) : (tensor<3x2xf32>, tensor<1xf32>) -> tensor<3x2xf32>
  %0 = "relax.multiply"(%x, %s) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// Ops without inputs fold too.
// CHECK-LABEL: func.func @fold_arange
// CHECK-NEXT: %[[C:.+]] = "relax.constant"() {value = dense<[0, 2, 4]> : tensor<3xi64>}
// CHECK-NEXT: return %[[C]]
func.func @fold_arange() -> tensor<3xi64> attributes {relax.function} {
  %0 = "relax.arange"() {start = 0, end = 6, step = 2, dtype = "int64"} : () -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// The same op on the same constant, twice (an unrolled recurrent cell transposes its weight at
// every step): folded once, both readers share the one constant.
// CHECK-LABEL: func.func @fold_once
// CHECK: %[[T:.+]] = "relax.constant"() {value = dense<{{\[}}[1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>}
// CHECK-NOT: "relax.constant"
// CHECK: %[[A:.+]] = "relax.call_tir"(%{{.+}}, %[[T]])
// CHECK: "relax.call_tir"(%[[A]], %[[T]])
func.func @fold_once(%x: tensor<2x2xf32>) -> tensor<2x2xf32> attributes {relax.function} {
  %c = "relax.constant"() {value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %t0 = "relax.permute_dims"(%c) {axes = [1, 0]} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %0 = "relax.multiply"(%x, %t0) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %t1 = "relax.permute_dims"(%c) {axes = [1, 0]} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %1 = "relax.multiply"(%0, %t1) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
}
