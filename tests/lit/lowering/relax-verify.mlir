// RUN: relaxmlir-opt %s -split-input-file --relax-verify | FileCheck %s
// Well-formed relax IR passes unchanged; the failures are pinned in
// tests/lit/dialects/relax-invalid.mlir.

func.func private @matmul(%a: tensor<2x8xf32>, %b: tensor<8x3xf32>, %out: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {relax.prim_func} {
  %0 = linalg.matmul ins(%a, %b : tensor<2x8xf32>, tensor<8x3xf32>) outs(%out : tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// Operands of different types (the callee decides), a dynamic dim against a static one, and
// side-effecting ops outside the dataflow block are all fine.
// CHECK-LABEL: func.func @well_formed
// CHECK: scf.execute_region
// CHECK: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @matmul
// CHECK: } {relax.dataflow}
// CHECK: "relax.builtin_alloc_tensor"()
// CHECK: "relax.call_packed"
func.func @well_formed(%x: tensor<?x8xf32> {relax.shape = ["n", 8]}, %w: tensor<8x3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = scf.execute_region -> tensor<2x3xf32> no_inline {
    %1 = "relax.call_tir"(%x, %w) {callee = @matmul} : (tensor<?x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
    scf.yield %1 : tensor<2x3xf32>
  } {relax.dataflow}
  %2 = "relax.builtin_alloc_tensor"() : () -> tensor<2x3xf32>
  "relax.call_packed"(%0, %2) {callee = "env.copy"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> ()
  return %2 : tensor<2x3xf32>
}
