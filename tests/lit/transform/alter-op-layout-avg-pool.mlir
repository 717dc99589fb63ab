// RUN: relaxmlir-opt %s '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' | FileCheck %s --check-prefix=LAYOUT
// RUN: relaxmlir-opt %s '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' --relax-legalize-ops --relax-fold-constant --relax-dead-code-elimination --relax-fuse-ops --relax-fuse-tir '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s --check-prefix=TILE

// Inception-v3's branch pool: a 3x3 / 1 average pool (padding counted in the divisor) between
// two convolutions. Its windows are the floor rule's, so it takes the blocked layout of the
// convolution before it and the one after reads it there: layout transforms only at the
// graph's boundaries. Then a 2x2 / 2 pool whose ceil_mode adds a window (7 rows, not 6): that
// window's divisor is not the blocked kernel's, so it stays in NCHW between two transforms.
// LAYOUT-LABEL: func.func @main
// LAYOUT: %[[X:.+]] = "relax.layout_transform"(%arg0) {dst_layout = "NCHW8c", src_layout = "NCHW"}
// LAYOUT: %[[C:.+]] = "relax.nn_conv2d"(%[[X]], %{{.+}}) {data_layout = "NCHW8c"
// LAYOUT: %[[P:.+]] = "relax.nn_avg_pool2d"(%[[C]]) {ceil_mode = false, count_include_pad = true, dilation = [1, 1], layout = "NCHW16c", padding = [1, 1, 1, 1], pool_size = [3, 3], strides = [1, 1]} : (tensor<1x2x13x13x16xf32>) -> tensor<1x2x13x13x16xf32>
// LAYOUT: %[[H:.+]] = "relax.nn_conv2d"(%[[P]], %{{.+}}) {data_layout = "NCHW16c"
// LAYOUT: %[[B:.+]] = "relax.layout_transform"(%[[H]]) {dst_layout = "NCHW", src_layout = "NCHW16c"}
// LAYOUT: "relax.nn_avg_pool2d"(%[[B]]) {ceil_mode = true, count_include_pad = false, dilation = [1, 1], layout = "NCHW", padding = [0, 0, 0, 0], pool_size = [2, 2], strides = [2, 2]} : (tensor<1x32x13x13xf32>) -> tensor<1x32x7x7xf32>
// LAYOUT: "relax.layout_transform"({{.*}}) {dst_layout = "NCHW16c", src_layout = "NCHW"}

// Lowered: the pool's taps are summed on the padded copy, elementwise along the channel block
// (the window unrolled), then divided by the window's 9 taps: no reduction loops over a window.
// TILE: func.func private @avg_pool2d({{.*}}relax.schedule = ["elementwise-16", "elementwise-16"]
// TILE: arith.divf %{{.*}}, %{{.*}} : vector<16xf32>

func.func @main(%x: tensor<1x8x15x15xf32>) -> tensor<1x32x7x7xf32> attributes {relax.function} {
  %y = scf.execute_region -> tensor<1x32x7x7xf32> no_inline {
    %w = "relax.constant"() {value = dense<0.01> : tensor<32x8x3x3xf32>} : () -> tensor<32x8x3x3xf32>
    %c = "relax.nn_conv2d"(%x, %w) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x8x15x15xf32>, tensor<32x8x3x3xf32>) -> tensor<1x32x13x13xf32>
    %p = "relax.nn_avg_pool2d"(%c) {ceil_mode = false, count_include_pad = true, dilation = [1, 1], layout = "NCHW", padding = [1, 1, 1, 1], pool_size = [3, 3], strides = [1, 1]} : (tensor<1x32x13x13xf32>) -> tensor<1x32x13x13xf32>
    %w2 = "relax.constant"() {value = dense<0.02> : tensor<32x32x1x1xf32>} : () -> tensor<32x32x1x1xf32>
    %h = "relax.nn_conv2d"(%p, %w2) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x32x13x13xf32>, tensor<32x32x1x1xf32>) -> tensor<1x32x13x13xf32>
    %d = "relax.nn_avg_pool2d"(%h) {ceil_mode = true, count_include_pad = false, dilation = [1, 1], layout = "NCHW", padding = [0, 0, 0, 0], pool_size = [2, 2], strides = [2, 2]} : (tensor<1x32x13x13xf32>) -> tensor<1x32x7x7xf32>
    %w3 = "relax.constant"() {value = dense<0.03> : tensor<32x32x1x1xf32>} : () -> tensor<32x32x1x1xf32>
    %o = "relax.nn_conv2d"(%d, %w3) {data_layout = "NCHW", dilation = [1, 1], groups = 1 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x32x7x7xf32>, tensor<32x32x1x1xf32>) -> tensor<1x32x7x7xf32>
    scf.yield %o : tensor<1x32x7x7xf32>
  }
  return %y : tensor<1x32x7x7xf32>
}
