// RUN: relaxmlir-opt %s -split-input-file --relax-verify | relaxmlir-opt -split-input-file --relax-verify | FileCheck %s
// RUN: relaxmlir-opt %s -split-input-file -mlir-print-op-generic | relaxmlir-opt -split-input-file | FileCheck %s

// Every relax op prints and parses back (print, parse, print); IRDL ops use the generic form.

func.func private @add(%a: tensor<4xf32>, %b: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%out : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @call_tir_in_dataflow
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[Y:.+]]: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function}
// CHECK: %[[BLOCK:.+]] = scf.execute_region -> tensor<4xf32> no_inline {
// CHECK:   %[[SUM:.+]] = "relax.call_tir"(%[[X]], %[[Y]]) {callee = @add} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK:   scf.yield %[[SUM]] : tensor<4xf32>
// CHECK: } {relax.dataflow}
// CHECK: return %[[BLOCK]]
func.func @call_tir_in_dataflow(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0 = scf.execute_region -> tensor<4xf32> no_inline {
    %1 = "relax.call_tir"(%x, %y) {callee = @add} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %1 : tensor<4xf32>
  } {relax.dataflow}
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @call_dps_packed
// CHECK-SAME: (%[[X:.+]]: tensor<?x8xf32> {relax.shape = ["n", 8]})
// CHECK: "relax.call_dps_packed"(%[[X]]) {callee = "env.relu", relax.shape = {{\[}}["n", 8]]} : (tensor<?x8xf32>) -> tensor<?x8xf32>
func.func @call_dps_packed(%x: tensor<?x8xf32> {relax.shape = ["n", 8]}) -> tensor<?x8xf32> attributes {relax.function} {
  %0 = "relax.call_dps_packed"(%x) {callee = "env.relu", relax.shape = [["n", 8]]} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// CHECK-LABEL: func.func @call_packed_and_alloc
// CHECK: %[[BUF:.+]] = "relax.builtin_alloc_tensor"() : () -> tensor<2x3xf32>
// CHECK: "relax.call_packed"(%[[BUF]]) {callee = "env.fill"} : (tensor<2x3xf32>) -> ()
// CHECK: return %[[BUF]]
func.func @call_packed_and_alloc() -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.builtin_alloc_tensor"() : () -> tensor<2x3xf32>
  "relax.call_packed"(%0) {callee = "env.fill"} : (tensor<2x3xf32>) -> ()
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @constant
// CHECK: "relax.constant"() {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
func.func @constant() -> tensor<2xf32> attributes {relax.function} {
  %0 = "relax.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// High-level ops (legalized later by relax-legalize-ops) keep their attributes.
// CHECK-LABEL: func.func @high_level_ops
// CHECK: %[[MM:.+]] = "relax.matmul"(%{{.+}}, %{{.+}}) {out_dtype = "float32", relax.shape = {{\[}}["n", 3]]}
// CHECK: %[[ADD:.+]] = "relax.add"(%[[MM]], %{{.+}}) {relax.shape = {{\[}}["n", 3]]}
// CHECK: "relax.nn_softmax"(%[[ADD]]) {axis = -1 : i64, relax.shape = {{\[}}["n", 3]]}
func.func @high_level_ops(%x: tensor<?x4xf32> {relax.shape = ["n", 4]}, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> attributes {relax.function} {
  %0 = "relax.matmul"(%x, %w) {out_dtype = "float32", relax.shape = [["n", 3]]} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  %1 = "relax.add"(%0, %b) {relax.shape = [["n", 3]]} : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %2 = "relax.nn_softmax"(%1) {axis = -1 : i64, relax.shape = [["n", 3]]} : (tensor<?x3xf32>) -> tensor<?x3xf32>
  return %2 : tensor<?x3xf32>
}

// -----

// Unary elementwise ops without attributes.
// CHECK-LABEL: func.func @unary_math
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK: "relax.abs"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.negative"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.exp"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.log"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.sqrt"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.rsqrt"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.sigmoid"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.tanh"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.erf"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.sin"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.cos"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.floor"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.ceil"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.round"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.sign"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.square"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.trunc"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.log1p"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.expm1"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.log2"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.log10"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.tan"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.asin"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.acos"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.atan"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.sinh"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.cosh"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.asinh"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.acosh"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.atanh"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.exp2"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @unary_math(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.abs"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "relax.negative"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "relax.exp"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = "relax.log"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = "relax.sqrt"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "relax.rsqrt"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = "relax.sigmoid"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = "relax.tanh"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %8 = "relax.erf"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %9 = "relax.sin"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %10 = "relax.cos"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %11 = "relax.floor"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %12 = "relax.ceil"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %13 = "relax.round"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %14 = "relax.sign"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %15 = "relax.square"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %16 = "relax.trunc"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %17 = "relax.log1p"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %18 = "relax.expm1"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %19 = "relax.log2"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %20 = "relax.log10"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %21 = "relax.tan"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %22 = "relax.asin"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %23 = "relax.acos"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %24 = "relax.atan"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %25 = "relax.sinh"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %26 = "relax.cosh"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %27 = "relax.asinh"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %28 = "relax.acosh"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %29 = "relax.atanh"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %30 = "relax.exp2"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %30 : tensor<2x3xf32>
}

// -----

// Float classification gives bool tensors (bytes: i8) for any dtype.
// CHECK-LABEL: func.func @float_classification
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[I:.+]]: tensor<3xi32>)
// CHECK: "relax.isnan"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xi8>
// CHECK: "relax.isinf"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xi8>
// CHECK: "relax.isfinite"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xi8>
// CHECK: "relax.isnan"(%[[I]]) : (tensor<3xi32>) -> tensor<3xi8>
func.func @float_classification(%x: tensor<2x3xf32>, %i: tensor<3xi32>) -> tensor<2x3xi8> attributes {relax.function} {
  %0 = "relax.isnan"(%x) : (tensor<2x3xf32>) -> tensor<2x3xi8>
  %1 = "relax.isinf"(%x) : (tensor<2x3xf32>) -> tensor<2x3xi8>
  %2 = "relax.isfinite"(%x) : (tensor<2x3xf32>) -> tensor<2x3xi8>
  %3 = "relax.isnan"(%i) : (tensor<3xi32>) -> tensor<3xi8>
  return %2 : tensor<2x3xi8>
}

// -----

// Activations (`relax.nn.*`), with and without attributes.
// CHECK-LABEL: func.func @activations
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK: "relax.nn_relu"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.nn_gelu"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.nn_gelu_tanh"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.nn_silu"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.nn_leaky_relu"(%[[X]]) {alpha = 1.000000e-01 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.nn_softmax"(%[[X]]) {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.nn_log_softmax"(%[[X]]) {axis = -1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.nn_dropout"(%[[X]]) {rate = 5.000000e-01 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @activations(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.nn_relu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "relax.nn_gelu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "relax.nn_gelu_tanh"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = "relax.nn_silu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = "relax.nn_leaky_relu"(%x) {alpha = 1.000000e-01 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "relax.nn_softmax"(%x) {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = "relax.nn_log_softmax"(%x) {axis = -1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = "relax.nn_dropout"(%x) {rate = 5.000000e-01 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %7 : tensor<2x3xf32>
}

// -----

// Elementwise ops with attributes: clip bounds are f64 whatever the tensor dtype.
// CHECK-LABEL: func.func @clip_and_astype
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[I:.+]]: tensor<2x3xi32>)
// CHECK: "relax.clip"(%[[X]]) {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.clip"(%[[I]]) {max = 6.000000e+00 : f64, min = 0xFFF0000000000000 : f64} : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK: "relax.astype"(%[[X]]) {dtype = "int32"} : (tensor<2x3xf32>) -> tensor<2x3xi32>
// CHECK: "relax.astype"(%[[X]]) {dtype = "bool"} : (tensor<2x3xf32>) -> tensor<2x3xi8>
func.func @clip_and_astype(%x: tensor<2x3xf32>, %i: tensor<2x3xi32>) -> tensor<2x3xi32> attributes {relax.function} {
  %0 = "relax.clip"(%x) {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "relax.clip"(%i) {max = 6.000000e+00 : f64, min = 0xFFF0000000000000 : f64} : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %2 = "relax.astype"(%x) {dtype = "int32"} : (tensor<2x3xf32>) -> tensor<2x3xi32>
  %3 = "relax.astype"(%x) {dtype = "bool"} : (tensor<2x3xf32>) -> tensor<2x3xi8>
  return %2 : tensor<2x3xi32>
}

// -----

// Binary arithmetic, with numpy broadcasting of the operands.
// CHECK-LABEL: func.func @arithmetic
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[Y:.+]]: tensor<3xf32>)
// CHECK: "relax.add"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.subtract"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.multiply"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.divide"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.floor_divide"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.floor_mod"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.power"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.maximum"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.minimum"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.mod"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.atan2"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.hypot"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.copysign"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
func.func @arithmetic(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.add"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "relax.subtract"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = "relax.multiply"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %3 = "relax.divide"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = "relax.floor_divide"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = "relax.floor_mod"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %6 = "relax.power"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %7 = "relax.maximum"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %8 = "relax.minimum"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %9 = "relax.mod"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %10 = "relax.atan2"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %11 = "relax.hypot"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %12 = "relax.copysign"(%x, %y) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %12 : tensor<2x3xf32>
}

// -----

// Comparisons give bool tensors (bytes: i8).
// CHECK-LABEL: func.func @comparisons
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[Y:.+]]: tensor<2x3xf32>)
// CHECK: "relax.equal"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
// CHECK: "relax.not_equal"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
// CHECK: "relax.less"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
// CHECK: "relax.less_equal"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
// CHECK: "relax.greater"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
// CHECK: "relax.greater_equal"(%[[X]], %[[Y]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
func.func @comparisons(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xi8> attributes {relax.function} {
  %0 = "relax.equal"(%x, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  %1 = "relax.not_equal"(%x, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  %2 = "relax.less"(%x, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  %3 = "relax.less_equal"(%x, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  %4 = "relax.greater"(%x, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  %5 = "relax.greater_equal"(%x, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  return %5 : tensor<2x3xi8>
}

// -----

// Logical ops on bool tensors, and where(condition, x1, x2).
// CHECK-LABEL: func.func @logical_and_where
// CHECK-SAME: (%[[M:.+]]: tensor<2x3xi8>, %[[X:.+]]: tensor<2x3xf32>, %[[Y:.+]]: tensor<3xf32>)
// CHECK: %[[LOGICAL_NOT:.+]] = "relax.logical_not"(%[[M]]) : (tensor<2x3xi8>) -> tensor<2x3xi8>
// CHECK: %[[LOGICAL_AND:.+]] = "relax.logical_and"(%[[M]], %[[LOGICAL_NOT]]) : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
// CHECK: %[[LOGICAL_OR:.+]] = "relax.logical_or"(%[[M]], %[[LOGICAL_AND]]) : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
// CHECK: "relax.where"(%[[LOGICAL_OR]], %[[X]], %[[Y]]) : (tensor<2x3xi8>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.logical_xor"(%[[LOGICAL_OR]], %[[M]]) : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
func.func @logical_and_where(%m: tensor<2x3xi8>, %x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.logical_not"(%m) : (tensor<2x3xi8>) -> tensor<2x3xi8>
  %1 = "relax.logical_and"(%m, %0) : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
  %2 = "relax.logical_or"(%m, %1) : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
  %3 = "relax.where"(%2, %x, %y) : (tensor<2x3xi8>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = "relax.logical_xor"(%2, %m) : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
  return %3 : tensor<2x3xf32>
}

// -----

// Bitwise ops on integer tensors.
// CHECK-LABEL: func.func @bitwise
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xi32>, %[[B:.+]]: tensor<3xi32>)
// CHECK: %[[AND:.+]] = "relax.bitwise_and"(%[[A]], %[[B]]) : (tensor<2x3xi32>, tensor<3xi32>) -> tensor<2x3xi32>
// CHECK: %[[OR:.+]] = "relax.bitwise_or"(%[[AND]], %[[B]]) : (tensor<2x3xi32>, tensor<3xi32>) -> tensor<2x3xi32>
// CHECK: %[[XOR:.+]] = "relax.bitwise_xor"(%[[OR]], %[[A]]) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK: "relax.bitwise_not"(%[[XOR]]) : (tensor<2x3xi32>) -> tensor<2x3xi32>
func.func @bitwise(%a: tensor<2x3xi32>, %b: tensor<3xi32>) -> tensor<2x3xi32> attributes {relax.function} {
  %0 = "relax.bitwise_and"(%a, %b) : (tensor<2x3xi32>, tensor<3xi32>) -> tensor<2x3xi32>
  %1 = "relax.bitwise_or"(%0, %b) : (tensor<2x3xi32>, tensor<3xi32>) -> tensor<2x3xi32>
  %2 = "relax.bitwise_xor"(%1, %a) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  %3 = "relax.bitwise_not"(%2) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  return %3 : tensor<2x3xi32>
}

// -----

// matmul keeps its out_dtype; symbolic result dims are in relax.shape.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[X:.+]]: tensor<?x4xf32> {relax.shape = ["n", 4]}, %[[W:.+]]: tensor<4x3xf32>)
// CHECK: "relax.matmul"(%[[X]], %[[W]]) {out_dtype = "float32", relax.shape = {{\[}}["n", 3]]} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
func.func @matmul(%x: tensor<?x4xf32> {relax.shape = ["n", 4]}, %w: tensor<4x3xf32>) -> tensor<?x3xf32> attributes {relax.function} {
  %0 = "relax.matmul"(%x, %w) {out_dtype = "float32", relax.shape = [["n", 3]]} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// Layout changes: permute_dims, reshape (symbolic dims as strings), flatten, squeeze, expand_dims.
// CHECK-LABEL: func.func @layout
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[N:.+]]: tensor<?x3xf32> {relax.shape = ["n", 3]})
// CHECK: "relax.permute_dims"(%[[X]]) {axes = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK: "relax.reshape"(%[[N]]) {relax.shape = {{\[}}["n", 3, 1]], shape = ["n", 3, 1]} : (tensor<?x3xf32>) -> tensor<?x3x1xf32>
// CHECK: "relax.flatten"(%[[X]]) : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK: %[[EXPAND_DIMS:.+]] = "relax.expand_dims"(%[[X]]) {axis = [0, 2]} : (tensor<2x3xf32>) -> tensor<1x2x1x3xf32>
// CHECK: "relax.squeeze"(%[[EXPAND_DIMS]]) {axis = [0, 2]} : (tensor<1x2x1x3xf32>) -> tensor<2x3xf32>
func.func @layout(%x: tensor<2x3xf32>, %n: tensor<?x3xf32> {relax.shape = ["n", 3]}) -> tensor<6xf32> attributes {relax.function} {
  %0 = "relax.permute_dims"(%x) {axes = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = "relax.reshape"(%n) {relax.shape = [["n", 3, 1]], shape = ["n", 3, 1]} : (tensor<?x3xf32>) -> tensor<?x3x1xf32>
  %2 = "relax.flatten"(%x) : (tensor<2x3xf32>) -> tensor<6xf32>
  %3 = "relax.expand_dims"(%x) {axis = [0, 2]} : (tensor<2x3xf32>) -> tensor<1x2x1x3xf32>
  %4 = "relax.squeeze"(%3) {axis = [0, 2]} : (tensor<1x2x1x3xf32>) -> tensor<2x3xf32>
  return %2 : tensor<6xf32>
}

// -----

// Channel blocking (AlterOpLayout's boundary op): 32 channels in blocks of 16 and back.
// CHECK-LABEL: func.func @blocked_layout
// CHECK: %[[B:.+]] = "relax.layout_transform"(%{{.+}}) {dst_layout = "NCHW16c", src_layout = "NCHW"} : (tensor<1x32x4x4xf32>) -> tensor<1x2x4x4x16xf32>
// CHECK: "relax.layout_transform"(%[[B]]) {dst_layout = "NCHW", src_layout = "NCHW16c"} : (tensor<1x2x4x4x16xf32>) -> tensor<1x32x4x4xf32>
func.func @blocked_layout(%x: tensor<1x32x4x4xf32>) -> tensor<1x32x4x4xf32> attributes {relax.function} {
  %0 = "relax.layout_transform"(%x) {src_layout = "NCHW", dst_layout = "NCHW16c"} : (tensor<1x32x4x4xf32>) -> tensor<1x2x4x4x16xf32>
  %1 = "relax.layout_transform"(%0) {src_layout = "NCHW16c", dst_layout = "NCHW"} : (tensor<1x2x4x4x16xf32>) -> tensor<1x32x4x4xf32>
  return %1 : tensor<1x32x4x4xf32>
}

// -----

// broadcast_to and tile.
// CHECK-LABEL: func.func @broadcast_and_tile
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32>)
// CHECK: %[[BROADCAST_TO:.+]] = "relax.broadcast_to"(%[[X]]) {shape = [2, 3]} : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.tile"(%[[BROADCAST_TO]]) {repeats = [2, 1]} : (tensor<2x3xf32>) -> tensor<4x3xf32>
func.func @broadcast_and_tile(%x: tensor<3xf32>) -> tensor<4x3xf32> attributes {relax.function} {
  %0 = "relax.broadcast_to"(%x) {shape = [2, 3]} : (tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "relax.tile"(%0) {repeats = [2, 1]} : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}

// -----

// Variadic ops: the segment sizes are bookkeeping, hidden on print and restored on parse.
// CHECK-LABEL: func.func @concat_and_split
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[Y:.+]]: tensor<2x3xf32>, %[[Z:.+]]: tensor<2x3xf32>)
// CHECK: "relax.concat"(%[[X]], %[[Y]], %[[Z]]) {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<6x3xf32>
// CHECK: %[[SPLIT:.+]]:3 = "relax.split"(%[[X]]) {axis = 1 : i64, indices = [1, 2]} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
func.func @concat_and_split(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>, %z: tensor<2x3xf32>) -> tensor<2x1xf32> attributes {relax.function} {
  %0 = "relax.concat"(%x, %y, %z) {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<6x3xf32>
  %1:3 = "relax.split"(%x) {axis = 1 : i64, indices = [1, 2]} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %1#2 : tensor<2x1xf32>
}

// -----

// take (gather along an axis) and strided_slice.
// CHECK-LABEL: func.func @take_and_strided_slice
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[IDX:.+]]: tensor<2xi64>)
// CHECK: "relax.take"(%[[X]], %[[IDX]]) {axis = 1 : i64, mode = "fast"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x2xf32>
// CHECK: "relax.strided_slice"(%[[X]]) {axes = [1], begin = [0], end = [3], strides = [2]} : (tensor<2x3xf32>) -> tensor<2x2xf32>
func.func @take_and_strided_slice(%x: tensor<2x3xf32>, %idx: tensor<2xi64>) -> tensor<2x2xf32> attributes {relax.function} {
  %0 = "relax.take"(%x, %idx) {axis = 1 : i64, mode = "fast"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  %1 = "relax.strided_slice"(%x) {axes = [1], begin = [0], end = [3], strides = [2]} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
}

// -----

// Reductions: axes resolved to a list (all axes when the API was given None).
// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK: "relax.sum"(%[[X]]) {axis = [0, 1], keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
// CHECK: "relax.mean"(%[[X]]) {axis = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK: "relax.max"(%[[X]]) {axis = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK: "relax.min"(%[[X]]) {axis = [0], keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
// CHECK: "relax.prod"(%[[X]]) {axis = [1], keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
// CHECK: "relax.variance"(%[[X]]) {axis = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32>
func.func @reductions(%x: tensor<2x3xf32>) -> tensor<f32> attributes {relax.function} {
  %0 = "relax.sum"(%x) {axis = [0, 1], keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %1 = "relax.mean"(%x) {axis = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  %2 = "relax.max"(%x) {axis = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  %3 = "relax.min"(%x) {axis = [0], keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  %4 = "relax.prod"(%x) {axis = [1], keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
  %5 = "relax.variance"(%x) {axis = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return %0 : tensor<f32>
}

// -----

// argmax/argmin: int64 indices; an empty axis list means over the flattened tensor.
// CHECK-LABEL: func.func @arg_reductions
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK: "relax.argmax"(%[[X]]) {axis = [], keepdims = false} : (tensor<2x3xf32>) -> tensor<i64>
// CHECK: "relax.argmin"(%[[X]]) {axis = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xi64>
func.func @arg_reductions(%x: tensor<2x3xf32>) -> tensor<i64> attributes {relax.function} {
  %0 = "relax.argmax"(%x) {axis = [], keepdims = false} : (tensor<2x3xf32>) -> tensor<i64>
  %1 = "relax.argmin"(%x) {axis = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xi64>
  return %0 : tensor<i64>
}

// -----

// Tensor creation: fill values are 0-d tensors, shapes and dtypes attributes.
// CHECK-LABEL: func.func @creation
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[V:.+]]: tensor<f32>)
// CHECK: "relax.full"(%[[V]]) {dtype = "float32", shape = [2, 3]} : (tensor<f32>) -> tensor<2x3xf32>
// CHECK: "relax.full_like"(%[[X]], %[[V]]) {dtype = "float32"} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: "relax.zeros"() {dtype = "float32", relax.shape = {{\[}}["n", 3]], shape = ["n", 3]} : () -> tensor<?x3xf32>
// CHECK: "relax.ones"() {dtype = "int64", shape = [2, 3]} : () -> tensor<2x3xi64>
// CHECK: "relax.arange"() {dtype = "int64", end = 6 : i64, start = 0 : i64, step = 2 : i64} : () -> tensor<3xi64>
// CHECK: "relax.arange"() {dtype = "float32", end = 1.000000e+00 : f64, start = 0.000000e+00 : f64, step = 2.500000e-01 : f64} : () -> tensor<4xf32>
// CHECK: "relax.tril"(%[[X]]) {k = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.triu"(%[[X]]) {k = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @creation(%x: tensor<2x3xf32>, %v: tensor<f32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.full"(%v) {dtype = "float32", shape = [2, 3]} : (tensor<f32>) -> tensor<2x3xf32>
  %1 = "relax.full_like"(%x, %v) {dtype = "float32"} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %2 = "relax.zeros"() {dtype = "float32", relax.shape = [["n", 3]], shape = ["n", 3]} : () -> tensor<?x3xf32>
  %3 = "relax.ones"() {dtype = "int64", shape = [2, 3]} : () -> tensor<2x3xi64>
  %4 = "relax.arange"() {dtype = "int64", end = 6 : i64, start = 0 : i64, step = 2 : i64} : () -> tensor<3xi64>
  %5 = "relax.arange"() {dtype = "float32", end = 1.000000e+00 : f64, start = 0.000000e+00 : f64, step = 2.500000e-01 : f64} : () -> tensor<4xf32>
  %6 = "relax.tril"(%x) {k = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = "relax.triu"(%x) {k = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %7 : tensor<2x3xf32>
}

// -----

// Convolution and pooling (NCHW); padding is (top, left, bottom, right).
// CHECK-LABEL: func.func @conv_and_pool
// CHECK-SAME: (%[[IMG:.+]]: tensor<1x2x4x4xf32>, %[[W:.+]]: tensor<3x2x3x3xf32>)
// CHECK: "relax.nn_conv2d"(%[[IMG]], %[[W]]) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
// CHECK: "relax.nn_max_pool2d"(%[[IMG]]) {ceil_mode = false, count_include_pad = false, dilation = [1, 1], layout = "NCHW", padding = [0, 0, 0, 0], pool_size = [2, 2], strides = [2, 2]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
// CHECK: "relax.nn_avg_pool2d"(%[[IMG]]) {ceil_mode = true, count_include_pad = true, dilation = [1, 1], layout = "NCHW", padding = [1, 1, 1, 1], pool_size = [3, 3], strides = [2, 2]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x3x3xf32>
// CHECK: "relax.nn_adaptive_avg_pool2d"(%[[IMG]]) {layout = "NCHW", output_size = [1, 1]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x1x1xf32>
func.func @conv_and_pool(%img: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32> attributes {relax.function} {
  %0 = "relax.nn_conv2d"(%img, %w) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  %1 = "relax.nn_max_pool2d"(%img) {ceil_mode = false, count_include_pad = false, dilation = [1, 1], layout = "NCHW", padding = [0, 0, 0, 0], pool_size = [2, 2], strides = [2, 2]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %2 = "relax.nn_avg_pool2d"(%img) {ceil_mode = true, count_include_pad = true, dilation = [1, 1], layout = "NCHW", padding = [1, 1, 1, 1], pool_size = [3, 3], strides = [2, 2]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x3x3xf32>
  %3 = "relax.nn_adaptive_avg_pool2d"(%img) {layout = "NCHW", output_size = [1, 1]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x1x1xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// -----

// Normalisations: layer_norm over `axes`, batch_norm (inference) along `axis`.
// CHECK-LABEL: func.func @norms
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[G:.+]]: tensor<3xf32>, %[[IMG:.+]]: tensor<1x2x4x4xf32>, %[[C:.+]]: tensor<2xf32>)
// CHECK: "relax.nn_layer_norm"(%[[X]], %[[G]], %[[G]]) {axes = [1], center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.nn_batch_norm"(%[[IMG]], %[[C]], %[[C]], %[[C]], %[[C]]) {axis = 1 : i64, center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
func.func @norms(%x: tensor<2x3xf32>, %g: tensor<3xf32>, %img: tensor<1x2x4x4xf32>, %c: tensor<2xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.nn_layer_norm"(%x, %g, %g) {axes = [1], center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "relax.nn_batch_norm"(%img, %c, %c, %c, %c) {axis = 1 : i64, center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Padding: (before, after) per axis; reflect/edge read mirrored or clamped indices.
// CHECK-LABEL: func.func @pad
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK: "relax.nn_pad"(%[[X]]) {pad_mode = "constant", pad_value = 5.000000e-01 : f64, pad_width = [0, 1, 2, 0]} : (tensor<2x3xf32>) -> tensor<3x5xf32>
// CHECK: "relax.nn_pad"(%[[X]]) {pad_mode = "reflect", pad_value = 0.000000e+00 : f64, pad_width = [1, 1, 2, 2]} : (tensor<2x3xf32>) -> tensor<4x7xf32>
// CHECK: "relax.nn_pad"(%[[X]]) {pad_mode = "edge", pad_value = 0.000000e+00 : f64, pad_width = [3, 0, 0, 4]} : (tensor<2x3xf32>) -> tensor<5x7xf32>
func.func @pad(%x: tensor<2x3xf32>) -> tensor<3x5xf32> attributes {relax.function} {
  %0 = "relax.nn_pad"(%x) {pad_mode = "constant", pad_value = 5.000000e-01 : f64, pad_width = [0, 1, 2, 0]} : (tensor<2x3xf32>) -> tensor<3x5xf32>
  %1 = "relax.nn_pad"(%x) {pad_mode = "reflect", pad_value = 0.000000e+00 : f64, pad_width = [1, 1, 2, 2]} : (tensor<2x3xf32>) -> tensor<4x7xf32>
  %2 = "relax.nn_pad"(%x) {pad_mode = "edge", pad_value = 0.000000e+00 : f64, pad_width = [3, 0, 0, 4]} : (tensor<2x3xf32>) -> tensor<5x7xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// Scans, sort order and element-wise gather/scatter.
// CHECK-LABEL: func.func @scan_sort_gather_scatter
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[I:.+]]: tensor<2x2xi64>, %[[U:.+]]: tensor<2x2xf32>)
// CHECK: "relax.cumsum"(%[[X]]) {axis = 1 : i64, dtype = "float32", exclusive = false} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: "relax.argsort"(%[[X]]) {axis = 0 : i64, descending = true, dtype = "int64"} : (tensor<2x3xf32>) -> tensor<2x3xi64>
// CHECK: "relax.gather_elements"(%[[X]], %[[I]]) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
// CHECK: "relax.scatter_elements"(%[[X]], %[[I]], %[[U]]) {axis = 1 : i64, reduction = "add"} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
func.func @scan_sort_gather_scatter(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>, %u: tensor<2x2xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.cumsum"(%x) {axis = 1 : i64, dtype = "float32", exclusive = false} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "relax.argsort"(%x) {axis = 0 : i64, descending = true, dtype = "int64"} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  %2 = "relax.gather_elements"(%x, %i) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  %3 = "relax.scatter_elements"(%x, %i, %u) {axis = 1 : i64, reduction = "add"} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  return %3 : tensor<2x3xf32>
}

// -----

// A static KV cache's write: index_copy, and the in-place call relax-inplace-state makes of it
// (the written operand last; the callee takes one argument per operand).
// CHECK-LABEL: func.func @index_copy_in_place
// CHECK-SAME: (%[[C:.+]]: tensor<1x4x2xf32>, %[[P:.+]]: tensor<1xi64>, %[[R:.+]]: tensor<1x1x2xf32>)
// CHECK: %[[NEW:.+]] = "relax.index_copy"(%[[C]], %[[P]], %[[R]]) {axis = 1 : i64} : (tensor<1x4x2xf32>, tensor<1xi64>, tensor<1x1x2xf32>) -> tensor<1x4x2xf32>
// CHECK: "relax.call_tir_inplace"(%[[P]], %[[R]], %[[NEW]]) {callee = @write_rows} : (tensor<1xi64>, tensor<1x1x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
func.func private @write_rows(%p: tensor<1xi64>, %r: tensor<1x1x2xf32>, %c: tensor<1x4x2xf32>) -> tensor<1x4x2xf32> attributes {relax.prim_func} {
  return %c : tensor<1x4x2xf32>
}

func.func @index_copy_in_place(%c: tensor<1x4x2xf32>, %p: tensor<1xi64>, %r: tensor<1x1x2xf32>) -> tensor<1x4x2xf32> attributes {relax.function} {
  %0 = "relax.index_copy"(%c, %p, %r) {axis = 1 : i64} : (tensor<1x4x2xf32>, tensor<1xi64>, tensor<1x1x2xf32>) -> tensor<1x4x2xf32>
  %1 = "relax.call_tir_inplace"(%p, %r, %0) {callee = @write_rows} : (tensor<1xi64>, tensor<1x1x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  return %1 : tensor<1x4x2xf32>
}
