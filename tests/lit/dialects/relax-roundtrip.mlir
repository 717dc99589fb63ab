// RUN: relaxmlir-opt %s -split-input-file | relaxmlir-opt -split-input-file | FileCheck %s
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
