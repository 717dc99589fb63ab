// RUN: relaxmlir-opt %s --relax-fold-batch-norm | FileCheck %s --check-prefix=FOLD
// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' | FileCheck %s --check-prefix=LAYOUT
// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' --relax-legalize-ops --relax-fold-constant --relax-dead-code-elimination --relax-fuse-ops --relax-fuse-tir | FileCheck %s --check-prefix=FUSED

// A DenseNet layer's input: the block's features so far, concatenated, then batch norm and
// relu before the convolution (pre-activation). No convolution precedes this batch norm, so it
// becomes a multiply and an add by two per-channel constants computed at compile time:
// s = gamma / sqrt(var + eps) = 1.5 / sqrt(2 + 1e-5) = 1.0606575, shift = beta - mean * s = 0.14393425.
// FOLD-LABEL: func.func @main
// FOLD-NOT: relax.nn_batch_norm
// FOLD: %[[CAT:.+]] = "relax.concat"(%arg0, %{{.+}}) {axis = 1 : i64} : (tensor<1x16x8x8xf32>, tensor<1x16x8x8xf32>) -> tensor<1x32x8x8xf32>
// FOLD: %[[S:.+]] = "relax.constant"() {value = dense<1.060657{{[0-9]*}}> : tensor<1x32x1x1xf32>}
// FOLD: %[[B:.+]] = "relax.constant"() {value = dense<0.143934{{[0-9]*}}> : tensor<1x32x1x1xf32>}
// FOLD: %[[M:.+]] = "relax.multiply"(%[[CAT]], %[[S]])
// FOLD: %[[A:.+]] = "relax.add"(%[[M]], %[[B]])
// FOLD: "relax.nn_relu"(%[[A]])

// In NCHW16c the constants are re-laid out like a bias: concat, scale, shift and relu stay in the
// blocked layout between the two convolutions (no layout change in between).
// LAYOUT-LABEL: func.func @main
// LAYOUT: %[[C0:.+]] = "relax.nn_conv2d"({{.*}}data_layout = "NCHW16c"
// LAYOUT-NOT: relax.layout_transform
// LAYOUT: %[[CAT:.+]] = "relax.concat"(%{{.+}}, %[[C0]]) {axis = 1 : i64} : (tensor<1x1x8x8x16xf32>, tensor<1x1x8x8x16xf32>) -> tensor<1x2x8x8x16xf32>
// LAYOUT-NOT: relax.layout_transform
// LAYOUT: "relax.multiply"(%[[CAT]], %{{.+}}) : (tensor<1x2x8x8x16xf32>, tensor<1x2x1x1x16xf32>) -> tensor<1x2x8x8x16xf32>
// LAYOUT-NOT: relax.layout_transform
// LAYOUT: "relax.nn_conv2d"({{.*}}data_layout = "NCHW16c"

// Fused: the convolution that makes the new features, the concat, the scale, the shift and the
// relu are one kernel over blocked tensors, with no square root left in it.
// FUSED: func.func private @fused_conv2d_concat_multiply_add_relu(%{{.*}}: tensor<1x1x8x8x16xf32>, %{{.*}}: tensor<1x1x3x3x16x16xf32>, %{{.*}}: tensor<1x2x1x1x16xf32>, %{{.*}}: tensor<1x2x1x1x16xf32>, %{{.*}}: tensor<1x2x8x8x16xf32>) -> tensor<1x2x8x8x16xf32>
// FUSED-NOT: math.rsqrt
// FUSED: return

func.func @main(%x: tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32> attributes {relax.function} {
  %y = scf.execute_region -> tensor<1x16x8x8xf32> no_inline {
    %w0 = "relax.constant"() {value = dense<0.01> : tensor<16x16x3x3xf32>} : () -> tensor<16x16x3x3xf32>
    %c0 = "relax.nn_conv2d"(%x, %w0) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x8x8xf32>
    %cat = "relax.concat"(%x, %c0) {axis = 1 : i64} : (tensor<1x16x8x8xf32>, tensor<1x16x8x8xf32>) -> tensor<1x32x8x8xf32>
    %gamma = "relax.constant"() {value = dense<1.5> : tensor<32xf32>} : () -> tensor<32xf32>
    %beta = "relax.constant"() {value = dense<0.25> : tensor<32xf32>} : () -> tensor<32xf32>
    %mean = "relax.constant"() {value = dense<0.1> : tensor<32xf32>} : () -> tensor<32xf32>
    %var = "relax.constant"() {value = dense<2.0> : tensor<32xf32>} : () -> tensor<32xf32>
    %bn = "relax.nn_batch_norm"(%cat, %gamma, %beta, %mean, %var) {axis = 1 : i64, center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<1x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x32x8x8xf32>
    %r = "relax.nn_relu"(%bn) : (tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
    %w1 = "relax.constant"() {value = dense<0.02> : tensor<16x32x1x1xf32>} : () -> tensor<16x32x1x1xf32>
    %c1 = "relax.nn_conv2d"(%r, %w1) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x32x8x8xf32>, tensor<16x32x1x1xf32>) -> tensor<1x16x8x8xf32>
    scf.yield %c1 : tensor<1x16x8x8xf32>
  } {relax.dataflow}
  return %y : tensor<1x16x8x8xf32>
}
