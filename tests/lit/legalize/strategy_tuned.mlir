// RUN: env RELAXMLIR_PRINT_STRATEGY=1 relaxmlir-opt %s '--relax-legalize-ops{target="llvm -mcpu=znver4 -num-cores=2 -l1d-cache=32768 -l2-cache=1048576 -l3-cache=33554432"}' 2>&1 >/dev/null | FileCheck %s --check-prefix=CHOICE
// RUN: relaxmlir-opt %s '--relax-legalize-ops{target="llvm -mcpu=znver4 -num-cores=2 -l1d-cache=32768 -l2-cache=1048576 -l3-cache=33554432"}' | FileCheck %s

// A tuned strategy choice (the module's `relax.tuned_strategies`, which MetaScheduleApplyDatabase
// writes) is keyed by the call's workload (op, operand and result types, attributes, target; the
// RUN lines spell the target out, else the key is the host's, which changes between machines):
// the stride-2 conv's workload names im2col + GEMM, the other conv has no record and keeps the
// default.
// CHOICE: strategy: relax.nn_conv2d at loc({{.*}}) on llvm: conv2d_nchw.im2col (plevel 8; tuned choice, workload ddc7f369d0638f3be18736d5;
// The GEMM the im2col implementation emits is legalized in turn by the matmul strategy.
// CHOICE: strategy: relax.matmul at loc({{.*}}) on llvm: matmul.packed (plevel 10;
// CHOICE: strategy: relax.nn_conv2d at loc({{.*}}) on llvm: conv2d_nchw.direct (plevel 10; condition NCHW data; others:

// im2col: the windows (N, C, KH, KW, OH, OW), viewed as the (N, C*KH*KW, OH*OW) column
// matrix; the kernel as (O, C*KH*KW); their product (N, O, OH*OW), reshaped to NCHW.
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[W:.+]] = "relax.call_tir"(%arg1) {callee = @{{reshape[0-9]*}}} : (tensor<8x3x3x3xf32>) -> tensor<8x27xf32>
// CHECK-DAG: %[[WIN:.+]] = "relax.call_tir"(%arg0) {callee = @im2col} : (tensor<2x3x9x9xf32>) -> tensor<2x3x3x3x4x4xf32>
// CHECK: %[[COLS:.+]] = "relax.call_tir"(%[[WIN]]) {callee = @{{reshape[0-9]*}}} : (tensor<2x3x3x3x4x4xf32>) -> tensor<2x27x16xf32>
// CHECK: %[[PROD:.+]] = "relax.call_tir"(%[[W]], %[[COLS]]) {callee = @matmul} : (tensor<8x27xf32>, tensor<2x27x16xf32>) -> tensor<2x8x16xf32>
// CHECK: %[[OUT:.+]] = "relax.call_tir"(%[[PROD]]) {callee = @{{reshape[0-9]*}}} : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
// CHECK: "relax.call_tir"(%[[OUT]], %arg2) {callee = @conv2d}
// CHECK: func.func private @im2col
// CHECK-NOT: reduction
// CHECK: func.func private @matmul
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "reduction"]

module attributes {relax.tuned_strategies = "{\"ddc7f369d0638f3be18736d5\": \"conv2d_nchw.im2col\"}"} {
  func.func @main(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32>, %w2: tensor<4x8x3x3xf32>) -> tensor<2x4x2x2xf32> attributes {relax.function} {
    %0 = "relax.nn_conv2d"(%x, %w) {strides = [2, 2], padding = [0, 0, 1, 1], dilation = [1, 1], groups = 1 : i64, data_layout = "NCHW", kernel_layout = "OIHW", out_layout = "NCHW", out_dtype = "float32"} : (tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x4x4xf32>
    %1 = "relax.nn_conv2d"(%0, %w2) {strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : i64, data_layout = "NCHW", kernel_layout = "OIHW", out_layout = "NCHW", out_dtype = "float32"} : (tensor<2x8x4x4xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x2x2xf32>
    return %1 : tensor<2x4x2x2xf32>
  }
}
