// RUN: env RELAXMLIR_PRINT_STRATEGY=1 relaxmlir-opt %s --relax-legalize-ops 2>&1 >/dev/null | FileCheck %s --check-prefix=CHOICE
// RUN: relaxmlir-opt %s --relax-legalize-ops | FileCheck %s

// Operator strategies: conv2d on llvm offers the direct kernel (plevel 10) and, specialized to
// pointwise convolutions by a condition, the contraction over channels (plevel 15). The 1x1
// call gets the contraction; the 3x3 call's condition is false, so it gets the direct kernel.
// CHOICE: strategy: relax.nn_conv2d at loc({{.*}}) on llvm: conv2d_nchw_1x1.contraction (plevel 15; condition 1x1 kernel, stride 1, no padding, no dilation, one group; others: {{.*}}conv2d_nchw.direct (plevel 10){{.*}})
// CHOICE: strategy: relax.nn_conv2d at loc({{.*}}) on llvm: conv2d_nchw.direct (plevel 10; condition NCHW data; others: {{.*}}conv2d_nchw_1x1.contraction (plevel 15, condition false){{.*}})

// The 1x1 kernel has one reduction (channels); the 3x3 kernel pads and
// reduces over channels and both window dims.
// CHECK-LABEL: func.func @main
// CHECK: relax.call_tir"(%arg0, %arg1) {callee = @[[POINTWISE:[A-Za-z0-9_]+]]}
// CHECK: relax.call_tir"(%{{.+}}, %arg2) {callee = @[[WINDOW:[A-Za-z0-9_]+]]}
// CHECK: func.func private @[[POINTWISE]]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK: func.func private @[[WINDOW]]
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]

func.func @main(%x: tensor<1x8x6x6xf32>, %w1: tensor<16x8x1x1xf32>, %w3: tensor<4x16x3x3xf32>) -> tensor<1x4x6x6xf32> attributes {relax.function} {
  %0 = "relax.nn_conv2d"(%x, %w1) {strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : i64, data_layout = "NCHW", kernel_layout = "OIHW", out_layout = "NCHW", out_dtype = "float32"} : (tensor<1x8x6x6xf32>, tensor<16x8x1x1xf32>) -> tensor<1x16x6x6xf32>
  %1 = "relax.nn_conv2d"(%0, %w3) {strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1 : i64, data_layout = "NCHW", kernel_layout = "OIHW", out_layout = "NCHW", out_dtype = "float32"} : (tensor<1x16x6x6xf32>, tensor<4x16x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %1 : tensor<1x4x6x6xf32>
}
