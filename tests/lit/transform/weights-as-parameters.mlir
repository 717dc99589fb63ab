// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' | FileCheck %s --check-prefix=LAYOUT
// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' --relax-lift-transform-params | FileCheck %s --check-prefix=LIFT

// A conv + batch norm + ReLU whose weights are parameters (num_input = 1: a model imported with
// keep_params_as_input). The batch norm folds as relax ops on the weights: W * s with
// s = gamma * rsqrt(var + eps), and a bias (-mean) * s + beta; the conv then takes NCHW16c with
// its weight re-laid out by a reshape and a transpose into OIHW16i16o, and the bias by a layout
// transform, so the ReLU stays blocked too.
// LAYOUT-LABEL: func.func @main
// LAYOUT-SAME: (%[[X:[^:]+]]: tensor<1x32x8x8xf32> {{[^,]+}}, %[[W:[^:]+]]: tensor<32x32x3x3xf32> {{[^,]+}}, %[[G:[^:]+]]: tensor<32xf32> {{[^,]+}}, %[[BETA:[^:]+]]: tensor<32xf32> {{[^,]+}}, %[[MEAN:[^:]+]]: tensor<32xf32> {{[^,]+}}, %[[VAR:[^:]+]]: tensor<32xf32> {{[^,]+}})
// LAYOUT-NOT: relax.nn_batch_norm
// LAYOUT: %[[EPS:.+]] = "relax.constant"() {value = dense<9.99999974E-6> : tensor<f32>}
// LAYOUT: %[[VE:.+]] = "relax.add"(%[[VAR]], %[[EPS]])
// LAYOUT: %[[INV:.+]] = "relax.rsqrt"(%[[VE]])
// LAYOUT: %[[S:.+]] = "relax.multiply"(%[[G]], %[[INV]])
// LAYOUT: %[[S4:.+]] = "relax.reshape"(%[[S]]) {shape = [32, 1, 1, 1]}
// LAYOUT: %[[WS:.+]] = "relax.multiply"(%[[W]], %[[S4]]) : (tensor<32x32x3x3xf32>, tensor<32x1x1x1xf32>) -> tensor<32x32x3x3xf32>
// LAYOUT: %[[XB:.+]] = "relax.layout_transform"(%[[X]]) {dst_layout = "NCHW16c", src_layout = "NCHW"}
// LAYOUT: %[[W6:.+]] = "relax.reshape"(%[[WS]]) {shape = [2, 16, 2, 16, 3, 3]}
// LAYOUT: %[[WB:.+]] = "relax.permute_dims"(%[[W6]]) {axes = [0, 2, 4, 5, 3, 1]} : (tensor<2x16x2x16x3x3xf32>) -> tensor<2x2x3x3x16x16xf32>
// LAYOUT: %[[C:.+]] = "relax.nn_conv2d"(%[[XB]], %[[WB]]) {data_layout = "NCHW16c", {{.*}}kernel_layout = "OIHW16i16o"
// LAYOUT: %[[NM:.+]] = "relax.negative"(%[[MEAN]])
// LAYOUT: %[[SH:.+]] = "relax.multiply"(%[[NM]], %[[S]])
// LAYOUT: %[[SB:.+]] = "relax.add"(%[[SH]], %[[BETA]])
// LAYOUT: %[[SB4:.+]] = "relax.reshape"(%[[SB]]) {shape = [1, 32, 1, 1]}
// LAYOUT: %[[BB:.+]] = "relax.layout_transform"(%[[SB4]]) {dst_layout = "NCHW16c", src_layout = "NCHW"}
// LAYOUT: %[[A:.+]] = "relax.add"(%[[C]], %[[BB]]) : (tensor<1x2x8x8x16xf32>, tensor<1x2x1x1x16xf32>)
// LAYOUT: %[[R:.+]] = "relax.nn_relu"(%[[A]]) : (tensor<1x2x8x8x16xf32>)
// LAYOUT: "relax.layout_transform"(%[[R]]) {dst_layout = "NCHW", src_layout = "NCHW16c"}

// Lifted: all of that weight work is main_transform_params'; main is the blocked conv, its
// bias and ReLU between the two boundary transforms.
// LIFT-LABEL: func.func @main_transform_params
// LIFT-SAME: -> (tensor<2x2x3x3x16x16xf32>, tensor<1x2x1x1x16xf32>)
// LIFT: relax.rsqrt
// LIFT: relax.permute_dims
// LIFT: relax.layout_transform
// LIFT-LABEL: func.func @main
// LIFT-SAME: (%[[X:[^:]+]]: tensor<1x32x8x8xf32> {relax.name = "x"}, %[[WB:[^:]+]]: tensor<2x2x3x3x16x16xf32> {relax.name = "permute_dims_0"}, %[[BB:[^:]+]]: tensor<1x2x1x1x16xf32> {relax.name = "layout_transform_1"})
// LIFT-NEXT: %[[XB:.+]] = "relax.layout_transform"(%[[X]])
// LIFT-NEXT: %[[C:.+]] = "relax.nn_conv2d"(%[[XB]], %[[WB]])
// LIFT-NEXT: %[[A:.+]] = "relax.add"(%[[C]], %[[BB]])
// LIFT-NEXT: %[[R:.+]] = "relax.nn_relu"(%[[A]])
// LIFT-NEXT: "relax.layout_transform"(%[[R]])
func.func @main(%x: tensor<1x32x8x8xf32> {relax.name = "x"}, %w: tensor<32x32x3x3xf32> {relax.name = "conv.weight"}, %gamma: tensor<32xf32> {relax.name = "bn.weight"}, %beta: tensor<32xf32> {relax.name = "bn.bias"}, %mean: tensor<32xf32> {relax.name = "bn.running_mean"}, %var: tensor<32xf32> {relax.name = "bn.running_var"}) -> tensor<1x32x8x8xf32> attributes {relax.function, relax.num_input = 1 : i64} {
  %c = "relax.nn_conv2d"(%x, %w) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x32x8x8xf32>, tensor<32x32x3x3xf32>) -> tensor<1x32x8x8xf32>
  %bn = "relax.nn_batch_norm"(%c, %gamma, %beta, %mean, %var) {axis = 1 : i64, center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<1x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x32x8x8xf32>
  %r = "relax.nn_relu"(%bn) : (tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  return %r : tensor<1x32x8x8xf32>
}
