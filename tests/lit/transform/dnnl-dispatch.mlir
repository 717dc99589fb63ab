// REQUIRES: dnnl
// RUN: relaxmlir-opt %s '--relax-fuse-ops-by-pattern=patterns=dnnl annotate-codegen=1' --relax-run-codegen | FileCheck %s

// RunCodegen appends the parameters the dnnl codegen computed as an int64 constant: version 1,
// flags (1: the residual is the first input), the weight's digest (0: not a constant), strides,
// padding (top, left, bottom, right), dilation, groups.
// CHECK-LABEL: func.func @main
// CHECK: %[[P1:[0-9]+]] = "relax.constant"() {value = dense<[1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]> : tensor<12xi64>}
// CHECK: "relax.call_dps_packed"(%arg3, %arg0, %arg1, %arg2, %[[P1]]) {callee = "fused_relax_nn_conv2d_relax_add_relax_add_relax_nn_relu_dnnl"}
// A constant weight gets a nonzero digest of its contents (the kernel keeps it reordered).
// CHECK: %[[P2:[0-9]+]] = "relax.constant"() {value = dense<[1, 0, {{[1-9][0-9]*}}, 2, 2, 1, 1, 1, 1, 1, 1, 4]> : tensor<12xi64>}
// CHECK: "relax.call_dps_packed"(%arg0, %{{[0-9]+}}, %[[P2]]) {callee = "fused_relax_nn_conv2d_dnnl"}
// CHECK: "relax.nn_conv2d"(%arg4, %arg5)
// CHECK-NOT: func.func private @fused

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
