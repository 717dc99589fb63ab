// RUN: relaxmlir-opt %s -split-input-file --relax-dead-code-elimination | FileCheck %s

// Unused pure ops, unused dataflow outputs and private PrimFuncs nothing calls are removed;
// side-effecting calls stay.
// CHECK-NOT: func.func private @unused_kernel
// CHECK-LABEL: func.func private @used_kernel
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK: %[[BLOCK:.+]] = scf.execute_region -> tensor<4xf32> no_inline {
// CHECK-NEXT: %[[KEEP:.+]] = "relax.call_tir"(%[[X]]) {callee = @used_kernel
// CHECK-NEXT: scf.yield %[[KEEP]] : tensor<4xf32>
// CHECK: "relax.call_packed"(%[[X]])
// CHECK-NOT: "relax.constant"
// CHECK: return %[[BLOCK]]
func.func private @unused_kernel(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  return %a : tensor<4xf32>
}

func.func private @used_kernel(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  return %a : tensor<4xf32>
}

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0:2 = scf.execute_region -> (tensor<4xf32>, tensor<4xf32>) no_inline {
    %1 = "relax.call_tir"(%x) {callee = @used_kernel} : (tensor<4xf32>) -> tensor<4xf32>
    %2 = "relax.call_tir"(%x) {callee = @used_kernel} : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %1, %2 : tensor<4xf32>, tensor<4xf32>
  } {relax.dataflow}
  "relax.call_packed"(%x) {callee = "env.print"} : (tensor<4xf32>) -> ()
  %c = "relax.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  return %0#0 : tensor<4xf32>
}
