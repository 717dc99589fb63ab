// RUN: relaxmlir-opt %s -split-input-file -verify-diagnostics --relax-verify
// RUN: relaxmlir-opt %s -split-input-file -verify-diagnostics --relax-legalize-ops

// Each high-level op's declared result type must be what its own inference rule (relax.op.*)
// gives for its operands and attributes: one case per op family. relax-legalize-ops checks the
// same before it trusts a declared type for a call_tir destination.

// binary: broadcasting (4x3, 3) gives 4x3
func.func @binary(%a: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<7x9xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.add' op result #0 is declared tensor<7x9xf32>, but its operands give tensor<4x3xf32>}}
  %0 = "relax.add"(%a, %b) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<7x9xf32>
  return %0 : tensor<7x9xf32>
}

// -----

// binary: operands that do not broadcast are rejected by the rule itself
func.func @binary_operands(%a: tensor<4x3xf32>, %b: tensor<5xf32>) -> tensor<4x5xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.multiply' op is invalid: relax.multiply:}}
  %0 = "relax.multiply"(%a, %b) : (tensor<4x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// binary: comparisons give bool (i8 in the IR), not the operands' dtype
func.func @compare(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.less' op result #0 is declared tensor<4xf32>, but its operands give tensor<4xi8>}}
  %0 = "relax.less"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// symbolic shapes: relax.shape must agree with the rule (n and m are different dims)
func.func @symbolic(%x: tensor<?x3xf32> {relax.shape = ["n", 3]}) -> tensor<?x3xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.exp' op result #0 is declared with shape (m, 3) (relax.shape), but its operands give (n, 3)}}
  %0 = "relax.exp"(%x) {relax.shape = [["m", 3]]} : (tensor<?x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// unary
func.func @unary(%x: tensor<2x3xf32>) -> tensor<3x2xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.tanh' op result #0 is declared tensor<3x2xf32>, but its operands give tensor<2x3xf32>}}
  %0 = "relax.tanh"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// linear algebra
func.func @linear_algebra(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>) -> tensor<2x4xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.matmul' op result #0 is declared tensor<2x4xf32>, but its operands give tensor<2x3xf32>}}
  %0 = "relax.matmul"(%x, %w) {out_dtype = "float32"} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// nn: a 3x3 convolution with padding 1 keeps 4x4, with 3 output channels
func.func @nn(%img: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x2x2xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.nn_conv2d' op result #0 is declared tensor<1x3x2x2xf32>, but its operands give tensor<1x3x4x4xf32>}}
  %0 = "relax.nn_conv2d"(%img, %w) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x2x2xf32>
  return %0 : tensor<1x3x2x2xf32>
}

// -----

// manipulate
func.func @manipulate(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.permute_dims' op result #0 is declared tensor<2x3xf32>, but its operands give tensor<3x2xf32>}}
  %0 = "relax.permute_dims"(%x) {axes = [1, 0]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// statistical
func.func @statistical(%x: tensor<2x3xf32>) -> tensor<2xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.sum' op result #0 is declared tensor<2xf32>, but its operands give tensor<f32>}}
  %0 = "relax.sum"(%x) {axis = [0, 1], keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// index
func.func @index(%x: tensor<2x3xf32>, %idx: tensor<2xi64>) -> tensor<2x3xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.take' op result #0 is declared tensor<2x3xf32>, but its operands give tensor<2x2xf32>}}
  %0 = "relax.take"(%x, %idx) {axis = 1 : i64, mode = "fast"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// search
func.func @search(%x: tensor<2x3xf32>) -> tensor<f32> attributes {relax.function} {
  // expected-error @+1 {{'relax.argmax' op result #0 is declared tensor<f32>, but its operands give tensor<i64>}}
  %0 = "relax.argmax"(%x) {axis = [], keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// create
func.func @create() -> tensor<3x2xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.zeros' op result #0 is declared tensor<3x2xf32>, but its operands give tensor<2x3xf32>}}
  %0 = "relax.zeros"() {dtype = "float32", shape = [2, 3]} : () -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// manipulate, several results: split into sections of 1 and 2
func.func @split(%x: tensor<2x3xf32>) -> tensor<2x1xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.split' op result #1 is declared tensor<2x1xf32>, but its operands give tensor<2x2xf32>}}
  %0:2 = "relax.split"(%x) {axis = 1 : i64, indices = [1]} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>)
  return %0#0 : tensor<2x1xf32>
}

// -----

// A discardable attribute of another pass is no argument of the op's rule: verifies.
func.func @extra_attribute(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.exp"(%x) {note = "kept"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
