// RUN: relaxmlir-opt %s -split-input-file --relax-dead-code-elimination | FileCheck %s

// Unused pure ops go, then the PrimFuncs nobody calls; side-effecting calls stay.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK-NOT: callee = @unused
// CHECK: %[[Y:.+]] = "relax.call_tir"(%[[X]]) {callee = @used}
// CHECK: "relax.call_packed"(%[[X]]) {callee = "env.log"}
// CHECK: return %[[Y]]
// CHECK: func.func private @used(
// CHECK-NOT: func.func private @unused(
// CHECK: func.func @public_kernel(
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %dead = "relax.call_tir"(%x) {callee = @unused} : (tensor<4xf32>) -> tensor<4xf32>
  %dead2 = "relax.exp"(%dead) : (tensor<4xf32>) -> tensor<4xf32>
  %y = "relax.call_tir"(%x) {callee = @used} : (tensor<4xf32>) -> tensor<4xf32>
  "relax.call_packed"(%x) {callee = "env.log"} : (tensor<4xf32>) -> ()
  return %y : tensor<4xf32>
}
func.func private @used(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  return %a : tensor<4xf32>
}
func.func private @unused(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  return %a : tensor<4xf32>
}
func.func @public_kernel(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  return %a : tensor<4xf32>
}

// -----

// A dataflow block drops the outputs nobody uses, and the ops that only fed them.
// CHECK-LABEL: func.func @dataflow_outputs
// CHECK: %[[BLOCK:.+]] = scf.execute_region -> tensor<4xf32> no_inline {
// CHECK-NOT: "relax.nn_relu"
// CHECK: %[[E:.+]] = "relax.exp"
// CHECK-NEXT: scf.yield %[[E]] : tensor<4xf32>
// CHECK: } {relax.dataflow}
// CHECK: return %[[BLOCK]]
func.func @dataflow_outputs(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0:2 = scf.execute_region -> (tensor<4xf32>, tensor<4xf32>) no_inline {
    %e = "relax.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %r = "relax.nn_relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %e, %r : tensor<4xf32>, tensor<4xf32>
  } {relax.dataflow}
  return %0#0 : tensor<4xf32>
}
