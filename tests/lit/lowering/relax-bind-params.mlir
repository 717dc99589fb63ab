// RUN: %PYTHON -c "import numpy as np; np.savez('%t.npz', w=np.arange(4, dtype='float32'))"
// RUN: relaxmlir-opt %s -split-input-file -verify-diagnostics --relax-bind-params=file=%t.npz | FileCheck %s
// RUN: relaxmlir-opt %s -split-input-file -verify-diagnostics '--relax-bind-params{file=%t.npz func=main}' | FileCheck %s

// Parameters named in the .npz (by their relax.name) become relax.constant ops and leave the
// signature; the others stay.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32> {relax.name = "x"}) -> tensor<4xf32>
// CHECK: %[[W:.+]] = "relax.constant"() {value = dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<4xf32>}
// CHECK: "relax.call_packed"(%[[X]], %[[W]])
func.func @main(%x: tensor<4xf32> {relax.name = "x"}, %w: tensor<4xf32> {relax.name = "w"}) -> tensor<4xf32> attributes {relax.function} {
  "relax.call_packed"(%x, %w) {callee = "env.show"} : (tensor<4xf32>, tensor<4xf32>) -> ()
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{relax-bind-params: parameter 'w' expects (tensor<3xf32>), got array of shape (4,) and dtype float32}}
func.func @main(%w: tensor<3xf32> {relax.name = "w"}) -> tensor<3xf32> attributes {relax.function} {
  return %w : tensor<3xf32>
}

// -----

// expected-error @+1 {{relax-bind-params: main has no parameter(s) ['w']; parameters: ['x']}}
func.func @main(%x: tensor<4xf32> {relax.name = "x"}) -> tensor<4xf32> attributes {relax.function} {
  return %x : tensor<4xf32>
}
