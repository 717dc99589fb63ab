// RUN: relaxmlir-opt %s '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' | FileCheck %s --check-prefix=LAYOUT
// RUN: relaxmlir-opt %s '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' --relax-legalize-ops --relax-fold-constant --relax-dead-code-elimination --relax-fuse-ops --relax-fuse-tir | FileCheck %s --check-prefix=FUSED
// RUN: relaxmlir-opt %s '--relax-alter-op-layout{target="llvm -mcpu=x86-64-v4"}' --relax-legalize-ops --relax-fold-constant --relax-dead-code-elimination --relax-fuse-ops --relax-fuse-tir '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s --check-prefix=TILE

// ResNeXt-50's last stage, small: a 3x3 convolution in 2 groups of 32 channels, each group two
// NCHW16c blocks in and out. It stays one blocked grouped convolution (an OIHW16i16o kernel of
// 2 input blocks per filter block), not one convolution per group over slices of the blocks
// joined by a concat.
// LAYOUT-LABEL: func.func @main
// LAYOUT: %[[X:.+]] = "relax.layout_transform"(%arg0) {dst_layout = "NCHW16c", src_layout = "NCHW"} : (tensor<1x64x8x8xf32>) -> tensor<1x4x8x8x16xf32>
// LAYOUT: %[[C:.+]] = "relax.nn_conv2d"(%[[X]], %{{.+}}) {data_layout = "NCHW16c", {{.*}}groups = 2 : i64, kernel_layout = "OIHW16i16o"{{.*}}} : (tensor<1x4x8x8x16xf32>, tensor<4x2x3x3x16x16xf32>) -> tensor<1x4x8x8x16xf32>
// LAYOUT: "relax.nn_relu"(%[[C]]) : (tensor<1x4x8x8x16xf32>)
// LAYOUT-NOT: relax.strided_slice
// LAYOUT-NOT: relax.concat

// Lowered: the group is a loop of its own that the image, the kernel [G, KO, KI, KH, KW, 16, 16]
// and the result [N, G, KO, H, W, 16] share; the image is read at block `2 * g + c`. The result
// is read as [N, 4, H, W, 16] by the ReLU and the transform back to NCHW, fused after it.
// FUSED: func.func private @fused_grouped_conv2d_nchwc_reshape1_relu_layout_transform1(%arg0: tensor<1x4x8x8x16xf32>, %arg1: tensor<2x2x2x3x3x16x16xf32>, %arg2: tensor<1x64x8x8xf32>)
// FUSED: linalg.generic {indexing_maps = [#[[IMAGE:.+]], #{{.+}}, #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]} ins(%{{.+}}, %arg1 : tensor<1x4x10x10x16xf32>, tensor<2x2x2x3x3x16x16xf32>) outs(%{{.+}} : tensor<1x2x2x8x8x16xf32>)
// FUSED: arith.maximumf
// FUSED: tensor.collapse_shape %{{.+}} {{\[}}[0], [1, 2, 3, 4, 5], [6], [7]] : tensor<1x1x1x2x2x16x8x8xf32> into tensor<1x64x8x8xf32>

// Tiled by the convolution rule: 2 filter blocks x 8 pixels x 16 lanes, one pass per input
// block of the group (the image's blocks `2 * g + c` at a stride of 2 for each c, the kernel's
// at c), each summing the window into the same register tiles.
// TILE: func.func private @fused_grouped_conv2d_nchwc_reshape1_relu_layout_transform1({{.*}}relax.schedule = ["elementwise-16", "conv-2x8x16", "conv-2x8x16", "transpose-16x8"]
// TILE: tensor.extract_slice %{{.+}}[0, 0, 0, 0, 0] [1, 2, 10, 10, 16] [1, 2, 1, 1, 1] : tensor<1x4x10x10x16xf32> to tensor<1x2x10x10x16xf32>
// TILE: tensor.extract_slice %arg1[0, 0, 0, 0, 0, 0, 0] [2, 2, 1, 3, 3, 16, 16] [1, 1, 2, 1, 1, 1, 1]
// TILE: math.fma %{{.+}}, %{{.+}}, %{{.+}} : vector<2x8x16xf32>
// TILE: tensor.extract_slice %{{.+}}[0, 1, 0, 0, 0] [1, 2, 10, 10, 16] [1, 2, 1, 1, 1] : tensor<1x4x10x10x16xf32> to tensor<1x2x10x10x16xf32>
// TILE: tensor.extract_slice %arg1[0, 0, 1, 0, 0, 0, 0] [2, 2, 1, 3, 3, 16, 16] [1, 1, 2, 1, 1, 1, 1]
// TILE: math.fma %{{.+}}, %{{.+}}, %{{.+}} : vector<2x8x16xf32>

func.func @main(%x: tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32> attributes {relax.function} {
  %y = scf.execute_region -> tensor<1x64x8x8xf32> no_inline {
    %w = "relax.constant"() {value = dense<0.01> : tensor<64x32x3x3xf32>} : () -> tensor<64x32x3x3xf32>
    %c = "relax.nn_conv2d"(%x, %w) {data_layout = "NCHW", dilation = [1, 1], groups = 2 : i64, kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x64x8x8xf32>, tensor<64x32x3x3xf32>) -> tensor<1x64x8x8xf32>
    %r = "relax.nn_relu"(%c) : (tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32>
    scf.yield %r : tensor<1x64x8x8xf32>
  } {relax.dataflow}
  return %y : tensor<1x64x8x8xf32>
}
