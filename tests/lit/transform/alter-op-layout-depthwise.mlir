// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' | FileCheck %s --check-prefix=LAYOUT
// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' --relax-legalize-ops --relax-fold-constant --relax-dead-code-elimination --relax-fuse-ops --relax-fuse-tir | FileCheck %s --check-prefix=FUSED
// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' --relax-legalize-ops --relax-fold-constant --relax-dead-code-elimination --relax-fuse-ops --relax-fuse-tir '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s --check-prefix=TILE

// The end of a MobileNetV2 inverted residual: a depthwise 3x3 convolution (groups = channels),
// its batch norm, ReLU6, then a 1x1 projection to 24 channels. On AVX-512 the depthwise
// convolution runs in NCHW16c with an OIHW1i16o kernel (one filter per channel, 16 channels
// per vector); 24 channels do not divide into 16, so the projection's output is NCHW8c (half a
// vector per block) instead of falling back to NCHW.
// LAYOUT-LABEL: func.func @main
// LAYOUT-NOT: relax.nn_batch_norm
// LAYOUT: %[[X:.+]] = "relax.layout_transform"(%arg0) {dst_layout = "NCHW16c", src_layout = "NCHW"} : (tensor<1x32x8x8xf32>) -> tensor<1x2x8x8x16xf32>
// LAYOUT: %[[W:.+]] = "relax.constant"() {{.*}} -> tensor<2x1x3x3x1x16xf32>
// LAYOUT: %[[D:.+]] = "relax.nn_conv2d"(%[[X]], %[[W]]) {data_layout = "NCHW16c", {{.*}}groups = 32 : i64, kernel_layout = "OIHW1i16o"{{.*}}} : (tensor<1x2x8x8x16xf32>, tensor<2x1x3x3x1x16xf32>) -> tensor<1x2x8x8x16xf32>
// LAYOUT: %[[B:.+]] = "relax.add"(%[[D]], %{{.+}}) : (tensor<1x2x8x8x16xf32>, tensor<1x2x1x1x16xf32>)
// LAYOUT: %[[R:.+]] = "relax.clip"(%[[B]])
// LAYOUT: %[[P:.+]] = "relax.nn_conv2d"(%[[R]], %{{.+}}) {data_layout = "NCHW16c", {{.*}}kernel_layout = "OIHW16i8o"{{.*}}} : (tensor<1x2x8x8x16xf32>, tensor<3x2x1x1x16x8xf32>) -> tensor<1x3x8x8x8xf32>
// LAYOUT: "relax.layout_transform"(%[[P]]) {dst_layout = "NCHW", src_layout = "NCHW8c"}
// LAYOUT-NOT: relax.layout_transform

// Lowered: the depthwise convolution's padding is a call of its own, which fusion puts after
// the layout transform that makes the image: that kernel writes into the padded buffer's
// interior and fills only its border (one fill per side). The depthwise convolution then
// reduces over its window only (the channel block is a parallel loop, read at the same
// position in the input, the kernel and the output) on its padded input as it is, and the
// convolution rule tiles it: 2 blocks x 8 pixels x 16 channels, its bias and ReLU6 fused after
// it and computed on each register tile by the same rule (the epilogue is "fused-into-0").
// FUSED: func.func private @fused_layout_transform_pad(%arg0: tensor<1x32x8x8xf32>, %arg1: tensor<1x2x10x10x16xf32>)
// FUSED-COUNT-4: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x2x{{1x10|10x1}}x16xf32>)
// FUSED: tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 1, 1, 0] [1, 2, 8, 8, 16]
// FUSED: func.func private @fused_depthwise_conv2d_nchwc_add_clip(%arg0: tensor<1x2x10x10x16xf32>
// FUSED: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%arg0, %arg1 : tensor<1x2x10x10x16xf32>, tensor<2x3x3x16xf32>)
// FUSED: arith.mulf
// FUSED: arith.addf
// FUSED: arith.minimumf
// TILE: func.func private @fused_depthwise_conv2d_nchwc_add_clip({{.*}}relax.schedule = ["conv-2x8x16+epilogue", "fused-into-0"]
// The transform back to NCHW after the projection is its epilogue, a transpose of the blocks
// (written to [N, C/8, 8, H, W], a view of the NCHW output), not scalar loops.
// TILE: func.func private @fused_conv2d_layout_transform1({{.*}}relax.schedule = ["conv-3x8x8", "transpose-8x8"]

func.func @main(%x: tensor<1x32x8x8xf32>) -> tensor<1x24x8x8xf32> attributes {relax.function} {
  %y = scf.execute_region -> tensor<1x24x8x8xf32> no_inline {
    %w = "relax.constant"() {value = dense<0.01> : tensor<32x1x3x3xf32>} : () -> tensor<32x1x3x3xf32>
    %c = "relax.nn_conv2d"(%x, %w) {data_layout = "NCHW", dilation = [1, 1], groups = 32 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x32x8x8xf32>, tensor<32x1x3x3xf32>) -> tensor<1x32x8x8xf32>
    %gamma = "relax.constant"() {value = dense<1.5> : tensor<32xf32>} : () -> tensor<32xf32>
    %beta = "relax.constant"() {value = dense<0.25> : tensor<32xf32>} : () -> tensor<32xf32>
    %mean = "relax.constant"() {value = dense<0.1> : tensor<32xf32>} : () -> tensor<32xf32>
    %var = "relax.constant"() {value = dense<2.0> : tensor<32xf32>} : () -> tensor<32xf32>
    %bn = "relax.nn_batch_norm"(%c, %gamma, %beta, %mean, %var) {axis = 1 : i64, center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<1x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x32x8x8xf32>
    %r = "relax.clip"(%bn) {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : (tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
    %w2 = "relax.constant"() {value = dense<0.02> : tensor<24x32x1x1xf32>} : () -> tensor<24x32x1x1xf32>
    %p = "relax.nn_conv2d"(%r, %w2) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x32x8x8xf32>, tensor<24x32x1x1xf32>) -> tensor<1x24x8x8xf32>
    scf.yield %p : tensor<1x24x8x8xf32>
  } {relax.dataflow}
  return %y : tensor<1x24x8x8xf32>
}
