// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// Ops without operands become calls without operands of kernels that only write.
// CHECK-LABEL: func.func @zeros
// CHECK: "relax.call_tir"() {callee = @[[FN:[a-z_0-9]+]]} : () -> tensor<2x3xf32>
// CHECK: func.func private @[[FN]](%[[OUT:[^:]+]]: tensor<2x3xf32>)
// CHECK: linalg.generic {{.*}} outs(%[[OUT]]
// CHECK: arith.constant 0.000000e+00 : f32
func.func @zeros() -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.zeros"() {shape = [2, 3], dtype = "float32"} : () -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @arange
// CHECK: "relax.call_tir"() {callee = @[[FN:[a-z_0-9]+]]} : () -> tensor<3xi64>
// CHECK: func.func private @[[FN]](
// CHECK: linalg.index 0
// CHECK: arith.muli
func.func @arange() -> tensor<3xi64> attributes {relax.function} {
  %0 = "relax.arange"() {start = 2, end = 11, step = 3, dtype = "int64"} : () -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// Up to a symbolic end (position ids of a dynamic sequence length): the kernel's length is its
// out argument's size, bound from the result shape (n - 1 here).
// CHECK-LABEL: func.func @arange_symbolic_end
// CHECK: "relax.call_tir"() {callee = @[[FN:[a-z_0-9]+]], relax.shape = {{\[\["\(n\)-1"\]\]}}} : () -> tensor<?xi64>
// CHECK: func.func private @[[FN]](%{{.*}}: tensor<?xi64> {relax.shape = {{\["\(n - 1\)"\]}}})
// CHECK: linalg.index 0
// CHECK: arith.addi
func.func @arange_symbolic_end(%x: tensor<?xf32> {relax.shape = ["n"]}) -> tensor<?xi64> attributes {relax.function} {
  %0 = "relax.arange"() {start = 1, end = "n", step = 1, dtype = "int64", relax.shape = [["(n)-1"]]} : () -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

// The causal mask of attention: zero above the diagonal.
// CHECK-LABEL: func.func @tril
// CHECK: func.func private @[[FN:[a-z_0-9]+]](
// CHECK: linalg.index 0
// CHECK: linalg.index 1
// CHECK: arith.cmpi sle
// CHECK: arith.select
func.func @tril(%x: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {relax.function} {
  %0 = "relax.tril"(%x) {k = 0} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
