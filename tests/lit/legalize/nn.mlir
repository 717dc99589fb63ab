// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// conv2d: padding is a guarded copy (scf.if never reads out of bounds), then a reduction over
// (channel, ky, kx) with strided windows; the symbolic batch stays symbolic.
// CHECK-LABEL: func.func @conv2d_symbolic_batch
// CHECK: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @[[FN:[a-z_0-9]+]], relax.shape = {{\[}}["n", 4, 4, 4]]}
// CHECK: func.func private @[[FN]](
// CHECK: scf.if
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]
func.func @conv2d_symbolic_batch(%x: tensor<?x3x8x8xf32> {relax.name = "x", relax.shape = ["n", 3, 8, 8]}, %w: tensor<4x3x3x3xf32>) -> tensor<?x4x4x4xf32> attributes {relax.function} {
  %0 = "relax.nn_conv2d"(%x, %w) {strides = [2, 2], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1, data_layout = "NCHW", kernel_layout = "OIHW", out_dtype = "float32", relax.shape = [["n", 4, 4, 4]]} : (tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<?x4x4x4xf32>
  return %0 : tensor<?x4x4x4xf32>
}

// -----

// max_pool2d without padding: a max reduction over the window, identity -inf.
// CHECK-LABEL: func.func @max_pool2d
// CHECK: func.func private @[[FN:[a-z_0-9]+]](
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: linalg.fill
// CHECK: arith.maximumf
func.func @max_pool2d(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> attributes {relax.function} {
  %0 = "relax.nn_max_pool2d"(%x) {pool_size = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1], ceil_mode = false, count_include_pad = false, layout = "NCHW"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  return %0 : tensor<1x2x2x2xf32>
}

// -----

// layer_norm: mean and variance reductions, then rsqrt and the affine parameters.
// CHECK-LABEL: func.func @layer_norm
// CHECK: "relax.call_tir"(%{{.+}}, %{{.+}}, %{{.+}}) {callee = @[[FN:[a-z_0-9]+]]}
// CHECK: func.func private @[[FN]](
// CHECK: math.rsqrt
func.func @layer_norm(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> attributes {relax.function} {
  %0 = "relax.nn_layer_norm"(%x, %g, %b) {axes = [1], epsilon = 1.0e-05 : f64, center = true, scale = true} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// dropout (inference) is the identity: no call, no PrimFunc.
// CHECK-LABEL: func.func @dropout
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
// CHECK-NOT: func.func private
func.func @dropout(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0 = "relax.nn_dropout"(%x) {rate = 5.000000e-01 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// constant padding guards its reads (scf.if); reflect and edge padding read in-bounds indices
// computed from the output index (reflect: select on the index, edge: clamped to the axis).
// CHECK-LABEL: func.func @pad_modes
// CHECK: func.func private @[[CONST:[a-z_0-9]+]](
// CHECK: scf.if
// CHECK: func.func private @[[REFLECT:[a-z_0-9]+]](
// CHECK-NOT: scf.if
// CHECK: arith.select
// CHECK: tensor.extract
// CHECK: func.func private @[[EDGE:[a-z_0-9]+]](
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: tensor.extract
func.func @pad_modes(%x: tensor<2x3xf32>) -> tensor<3x5xf32> attributes {relax.function} {
  %0 = "relax.nn_pad"(%x) {pad_mode = "constant", pad_value = 5.000000e-01 : f64, pad_width = [0, 1, 2, 0]} : (tensor<2x3xf32>) -> tensor<3x5xf32>
  %1 = "relax.nn_pad"(%x) {pad_mode = "reflect", pad_value = 0.000000e+00 : f64, pad_width = [1, 1, 2, 2]} : (tensor<2x3xf32>) -> tensor<4x7xf32>
  %2 = "relax.nn_pad"(%x) {pad_mode = "edge", pad_value = 0.000000e+00 : f64, pad_width = [3, 0, 0, 4]} : (tensor<2x3xf32>) -> tensor<5x7xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// A pad by nothing is its input: no kernel (topi.nn.pad hands back its input tensor, which a
// PrimFunc cannot list as both input and output).
// CHECK-LABEL: func.func @pad_by_nothing
// CHECK-NOT: relax.call_tir
// CHECK: return %arg0
func.func @pad_by_nothing(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.nn_pad"(%x) {pad_mode = "constant", pad_value = 0.000000e+00 : f64, pad_width = [0, 0, 0, 0]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
