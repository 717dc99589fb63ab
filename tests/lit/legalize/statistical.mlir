// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// A reduction is a linalg.fill of the identity and a generic with reduction iterators.
// CHECK-LABEL: func.func @sum_keepdims
// CHECK: "relax.call_tir"(%{{.+}}) {callee = @[[FN:[a-z_0-9]+]]} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK: func.func private @[[FN]](
// CHECK: linalg.fill
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK: arith.addf
func.func @sum_keepdims(%x: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> attributes {relax.function} {
  %0 = "relax.sum"(%x) {axis = [0, 2], keepdims = true} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return %0 : tensor<1x3x1xf32>
}

// -----

// mean over a symbolic axis divides by the runtime size.
// CHECK-LABEL: func.func @mean_symbolic
// CHECK: func.func private @[[FN:[a-z_0-9]+]](
// CHECK: %[[N:.+]] = tensor.dim
// CHECK: arith.sitofp
// CHECK: arith.divf
func.func @mean_symbolic(%x: tensor<?x4xf32> {relax.name = "x", relax.shape = ["n", 4]}) -> tensor<4xf32> attributes {relax.function} {
  %0 = "relax.mean"(%x) {axis = [0], keepdims = false} : (tensor<?x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// argmax: the maximum, then the least index that holds it, as int64.
// CHECK-LABEL: func.func @argmax
// CHECK: "relax.call_tir"(%{{.+}}) {callee = @[[FN:[a-z_0-9]+]]} : (tensor<3x5xf32>) -> tensor<3xi64>
// CHECK: func.func private @[[FN]](
// CHECK: arith.maximumf
// CHECK: arith.cmpf oeq
// CHECK: arith.minsi
func.func @argmax(%x: tensor<3x5xf32>) -> tensor<3xi64> attributes {relax.function} {
  %0 = "relax.argmax"(%x) {axis = [1], keepdims = false} : (tensor<3x5xf32>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// cumsum and argsort are quadratic along their axis: a reduction over the whole axis per
// output element, masked by position (cumsum) or by rank (argsort's second stage).
// CHECK-LABEL: func.func @cumsum_argsort
// CHECK: func.func private @[[CUMSUM:[a-z_0-9]+]](
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.select
// CHECK: arith.addf
// CHECK: func.func private @[[ARGSORT:[a-z_0-9]+]](
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.cmpf
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.addi
func.func @cumsum_argsort(%x: tensor<2x3xf32>) -> tensor<2x3xi64> attributes {relax.function} {
  %0 = "relax.cumsum"(%x) {axis = 1 : i64, dtype = "float32", exclusive = false} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "relax.argsort"(%0) {axis = 1 : i64, descending = false, dtype = "int64"} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  return %1 : tensor<2x3xi64>
}
