// RUN: relaxmlir-opt %s -split-input-file --relax-inline-dataflow | FileCheck %s

func.func private @add(%a: tensor<4xf32>, %b: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%out : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// The block's ops move into the function; uses of the block's results use the yielded values.
// CHECK-LABEL: func.func @two_blocks
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NOT: scf.execute_region
// CHECK: %[[A:.+]] = "relax.call_tir"(%[[X]], %[[X]])
// CHECK-NOT: scf.yield
// CHECK: %[[B:.+]] = "relax.call_tir"(%[[A]], %[[X]])
// CHECK: %[[C:.+]] = "relax.call_tir"(%[[B]], %[[A]])
// CHECK: return %[[C]]
func.func @two_blocks(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0 = scf.execute_region -> tensor<4xf32> no_inline {
    %1 = "relax.call_tir"(%x, %x) {callee = @add} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %1 : tensor<4xf32>
  } {relax.dataflow}
  %2:2 = scf.execute_region -> (tensor<4xf32>, tensor<4xf32>) no_inline {
    %3 = "relax.call_tir"(%0, %x) {callee = @add} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %3, %0 : tensor<4xf32>, tensor<4xf32>
  } {relax.dataflow}
  %4 = "relax.call_tir"(%2#0, %2#1) {callee = @add} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %4 : tensor<4xf32>
}

// -----

// Only graph functions are touched: an execute_region elsewhere stays.
// CHECK-LABEL: func.func @not_a_graph_function
// CHECK: scf.execute_region
func.func @not_a_graph_function(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = scf.execute_region -> tensor<4xf32> no_inline {
    scf.yield %x : tensor<4xf32>
  } {relax.dataflow}
  return %0 : tensor<4xf32>
}
