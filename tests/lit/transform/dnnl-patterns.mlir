// RUN: relaxmlir-opt %s --relax-fuse-ops-by-pattern=patterns=dnnl | FileCheck %s

// conv2d + per-channel bias + a residual added on the left + relu: one composite, whose leaves
// (the kernel's inputs) start with the residual.
// CHECK-LABEL: func.func @main
// CHECK: call @fused_relax_nn_conv2d_relax_add_relax_add_relax_nn_relu(%arg3, %arg0, %arg1, %arg2)
// A depthwise, strided conv with a constant weight: the constant goes inside the composite.
// CHECK: call @fused_relax_nn_conv2d(%arg0)
// float16 is not taken.
// CHECK: "relax.nn_conv2d"(%arg4, %arg5)
// CHECK-LABEL: func.func private @fused_relax_nn_conv2d(
// CHECK-SAME: attributes {relax.composite = "dnnl.conv2d"}
// CHECK-NEXT: "relax.constant"
// CHECK-NEXT: "relax.nn_conv2d"
// CHECK-LABEL: func.func private @fused_relax_nn_conv2d_relax_add_relax_add_relax_nn_relu(
// CHECK-SAME: {relax.name = "residual"}
// CHECK-SAME: attributes {relax.composite = "dnnl.conv2d_bias_add_relu"}

func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %b: tensor<1x8x1x1xf32>, %r: tensor<1x8x8x8xf32>, %h: tensor<1x4x8x8xf16>, %hw: tensor<4x4x1x1xf16>) -> (tensor<1x8x8x8xf32>, tensor<1x4x4x4xf32>, tensor<1x4x8x8xf16>) attributes {relax.function} {
  %0 = "relax.nn_conv2d"(%x, %w) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x8x8xf32>
  %1 = "relax.add"(%0, %b) : (tensor<1x8x8x8xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x8x8xf32>
  %2 = "relax.add"(%r, %1) : (tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %3 = "relax.nn_relu"(%2) : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %c = "relax.constant"() {value = dense<0.5> : tensor<4x1x3x3xf32>} : () -> tensor<4x1x3x3xf32>
  %4 = "relax.nn_conv2d"(%x, %c) {data_layout = "NCHW", dilation = [1, 1], groups = 4 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [2, 2]} : (tensor<1x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x4x4xf32>
  %5 = "relax.nn_conv2d"(%h, %hw) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float16", padding = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x4x8x8xf16>, tensor<4x4x1x1xf16>) -> tensor<1x4x8x8xf16>
  return %3, %4, %5 : tensor<1x8x8x8xf32>, tensor<1x4x4x4xf32>, tensor<1x4x8x8xf16>
}
