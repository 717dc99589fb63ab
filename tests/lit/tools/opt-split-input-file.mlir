// RUN: relaxmlir-opt %s -split-input-file | FileCheck %s
// RUN: not relaxmlir-opt %s -split-input-file --relax-verify 2>&1 | FileCheck %s --check-prefix=ERR

// Each chunk is parsed and transformed on its own; outputs are joined by the marker, and
// diagnostics keep the line numbers of the whole file.

// CHECK-LABEL: func.func @first
// CHECK: // -----
// CHECK-LABEL: func.func @second
// CHECK: // -----
// CHECK-LABEL: func.func @third
func.func @first() {
  return
}

// -----

func.func @second() {
  return
}

// -----

// ERR: opt-split-input-file.mlir:[[@LINE+2]]:8: error: 'relax.call_tir' op callee @missing not found in the module
func.func @third(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "relax.call_tir"(%x) {callee = @missing} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
