// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' | FileCheck %s --check-prefix=LAYOUT
// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' --relax-legalize-ops --relax-fold-constant --relax-dead-code-elimination --relax-fuse-ops --relax-fuse-tir | FileCheck %s --check-prefix=FUSED
// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v3"}' | FileCheck %s --check-prefix=AVX
// RUN: relaxmlir-opt %s --relax-fold-batch-norm '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v3"}' --relax-legalize-ops --relax-fold-constant --relax-dead-code-elimination --relax-fuse-ops --relax-fuse-tir '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v3" threads=1 strict=true}' | FileCheck %s --check-prefix=AVXTILE
// RUN: relaxmlir-opt %s --relax-fold-batch-norm --relax-alter-op-layout | FileCheck %s --check-prefix=NOTARGET

// A ResNet basic block's second half: conv -> batch norm -> + identity -> relu. The batch norm
// folds into the weights and a per-channel bias; on AVX-512 (16 f32 lanes) the convolution runs
// in NCHW16c, its bias and the residual add and relu follow it into that layout, and the only
// layout changes left are at the block's boundaries.
// LAYOUT-LABEL: func.func @main
// LAYOUT-NOT: relax.nn_batch_norm
// LAYOUT: %[[X:.+]] = "relax.layout_transform"(%arg0) {dst_layout = "NCHW16c", src_layout = "NCHW"} : (tensor<1x32x8x8xf32>) -> tensor<1x2x8x8x16xf32>
// LAYOUT: %[[W:.+]] = "relax.constant"() {value = {{.*}}} : () -> tensor<2x2x3x3x16x16xf32>
// LAYOUT: %[[C:.+]] = "relax.nn_conv2d"(%[[X]], %[[W]]) {data_layout = "NCHW16c", {{.*}}kernel_layout = "OIHW16i16o"{{.*}}} : (tensor<1x2x8x8x16xf32>, tensor<2x2x3x3x16x16xf32>) -> tensor<1x2x8x8x16xf32>
// LAYOUT: %[[B:.+]] = "relax.constant"() {value = {{.*}}} : () -> tensor<1x2x1x1x16xf32>
// LAYOUT: %[[CB:.+]] = "relax.add"(%[[C]], %[[B]]) : (tensor<1x2x8x8x16xf32>, tensor<1x2x1x1x16xf32>) -> tensor<1x2x8x8x16xf32>
// LAYOUT: %[[R:.+]] = "relax.add"(%[[CB]], %[[X]]) : (tensor<1x2x8x8x16xf32>, tensor<1x2x8x8x16xf32>) -> tensor<1x2x8x8x16xf32>
// LAYOUT: %[[Y:.+]] = "relax.nn_relu"(%[[R]]) : (tensor<1x2x8x8x16xf32>) -> tensor<1x2x8x8x16xf32>
// LAYOUT: "relax.layout_transform"(%[[Y]]) {dst_layout = "NCHW", src_layout = "NCHW16c"} : (tensor<1x2x8x8x16xf32>) -> tensor<1x32x8x8xf32>
// LAYOUT-NOT: relax.layout_transform

// Lowered: conv + bias + residual add + relu are one kernel over blocked tensors (the window's
// channel blocks, taps and in-block channels are its reductions; the output block is innermost),
// which also writes the block's NCHW result (the boundary transform, fused as its epilogue).
// FUSED: func.func private @fused_conv2d_add_add1_relu_layout_transform1(%{{.*}}: tensor<1x2x8x8x16xf32>, %{{.*}}: tensor<2x2x3x3x16x16xf32>, %{{.*}}: tensor<1x2x1x1x16xf32>, %{{.*}}: tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
// FUSED: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]} ins(%{{.*}}, %arg1 : tensor<1x2x10x10x16xf32>, tensor<2x2x3x3x16x16xf32>)
// FUSED: arith.mulf
// FUSED: arith.addf
// FUSED: linalg.generic {{.*}} ins(%{{.*}}, %arg2, %arg0 : tensor<1x2x8x8x16xf32>, tensor<1x2x1x1x16xf32>, tensor<1x2x8x8x16xf32>)
// FUSED: arith.addf
// FUSED: arith.addf
// FUSED: arith.maximumf
// FUSED: return
// FUSED-LABEL: func.func @main
// FUSED: %[[X:.+]] = "relax.call_tir"(%arg0) {callee = @layout_transform}
// FUSED: "relax.call_tir"(%[[X]], %{{.*}}) {callee = @fused_conv2d_add_add1_relu_layout_transform1}

// AVX2 has 8 lanes: NCHW8c.
// AVX: "relax.nn_conv2d"{{.*}}data_layout = "NCHW8c"{{.*}}kernel_layout = "OIHW8i8o"
// Its register tile: 4 blocks of 8 output channels x 2 pixels (8 sums from 4 weight loads and 2
// broadcasts per step): up to 32 output channels per tile, i.e. 4 blocks of 8 (on 14-pixel rows
// a limit of 2 blocks left 2 x 2 = 4 sums, bound by FMA latency).
// AVXTILE: relax.schedule = ["elementwise-8", "conv-4x2x8",

// Without a target (in scope or given) the layout pass leaves the module as it is.
// NOTARGET-NOT: relax.layout_transform
// NOTARGET: data_layout = "NCHW"

func.func @main(%x: tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32> attributes {relax.function} {
  %y = scf.execute_region -> tensor<1x32x8x8xf32> no_inline {
    %w = "relax.constant"() {value = dense<0.01> : tensor<32x32x3x3xf32>} : () -> tensor<32x32x3x3xf32>
    %c = "relax.nn_conv2d"(%x, %w) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x32x8x8xf32>, tensor<32x32x3x3xf32>) -> tensor<1x32x8x8xf32>
    %gamma = "relax.constant"() {value = dense<1.5> : tensor<32xf32>} : () -> tensor<32xf32>
    %beta = "relax.constant"() {value = dense<0.25> : tensor<32xf32>} : () -> tensor<32xf32>
    %mean = "relax.constant"() {value = dense<0.1> : tensor<32xf32>} : () -> tensor<32xf32>
    %var = "relax.constant"() {value = dense<2.0> : tensor<32xf32>} : () -> tensor<32xf32>
    %bn = "relax.nn_batch_norm"(%c, %gamma, %beta, %mean, %var) {axis = 1 : i64, center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<1x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x32x8x8xf32>
    %sum = "relax.add"(%bn, %x) : (tensor<1x32x8x8xf32>, tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
    %r = "relax.nn_relu"(%sum) : (tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
    scf.yield %r : tensor<1x32x8x8xf32>
  } {relax.dataflow}
  return %y : tensor<1x32x8x8xf32>
}
