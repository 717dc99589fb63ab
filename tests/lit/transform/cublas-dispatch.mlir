// RUN: relaxmlir-opt %s '--relax-fuse-ops-by-pattern=patterns=cublas annotate-codegen=1' | FileCheck %s --check-prefix=FUSE
// RUN: relaxmlir-opt %s '--relax-fuse-ops-by-pattern=patterns=cublas annotate-codegen=1' --relax-run-codegen | FileCheck %s --check-prefix=CODEGEN

// The tutorial's linear + relu: one composite, cuBLASLt's RELU_BIAS epilogue.
// FUSE-LABEL: func.func @linear_relu
// FUSE: call @fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_cublas(%arg0, %arg1, %arg2)
// FUSE: func.func private @fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_cublas({{.+}}) -> tensor<4x8xf32> attributes {relax.codegen = "cublas", relax.composite = "cublas.matmul_transposed_bias_relu"}
// CODEGEN-LABEL: func.func @linear_relu
// CODEGEN: "relax.call_dps_packed"(%arg0, %arg1, %arg2) {callee = "fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_cublas"}
// CODEGEN-NOT: "relax.matmul"
func.func @linear_relu(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> attributes {relax.function} {
  %0 = "relax.permute_dims"(%w) {axes = [1, 0]} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %1 = "relax.matmul"(%x, %0) {out_dtype = "float32"} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %2 = "relax.add"(%1, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %3 = "relax.nn_relu"(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}

// float16, batch dims, the tanh GELU: the GELU_BIAS epilogue.
// CODEGEN-LABEL: func.func @f16_gelu_tanh
// CODEGEN: "relax.call_dps_packed"(%arg0, %arg1, %arg2) {callee = "fused_relax_matmul_relax_add_relax_nn_gelu_tanh_cublas"}
// CODEGEN-SAME: -> tensor<2x3x8xf16>
func.func @f16_gelu_tanh(%x: tensor<2x3x16xf16>, %w: tensor<16x8xf16>, %b: tensor<8xf16>) -> tensor<2x3x8xf16> attributes {relax.function} {
  %0 = "relax.matmul"(%x, %w) {out_dtype = "float16"} : (tensor<2x3x16xf16>, tensor<16x8xf16>) -> tensor<2x3x8xf16>
  %1 = "relax.add"(%0, %b) : (tensor<2x3x8xf16>, tensor<8xf16>) -> tensor<2x3x8xf16>
  %2 = "relax.nn_gelu_tanh"(%1) : (tensor<2x3x8xf16>) -> tensor<2x3x8xf16>
  return %2 : tensor<2x3x8xf16>
}

// cuBLASLt's GELU is the tanh approximation: the erf GELU stays a relax op after matmul + bias.
// CODEGEN-LABEL: func.func @erf_gelu
// CODEGEN: %[[MM:.+]] = "relax.call_dps_packed"(%arg0, %arg1, %arg2) {callee = "fused_relax_matmul_relax_add_cublas"}
// CODEGEN: "relax.nn_gelu"(%[[MM]])
func.func @erf_gelu(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> attributes {relax.function} {
  %0 = "relax.matmul"(%x, %w) {out_dtype = "float32"} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = "relax.add"(%0, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %2 = "relax.nn_gelu"(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// Batched matmul with a broadcast batch dim: the plain kernel takes any batch layout.
// CODEGEN-LABEL: func.func @batched
// CODEGEN: "relax.call_dps_packed"(%arg0, %arg1) {callee = "fused_relax_matmul_cublas"}
func.func @batched(%a: tensor<2x3x5x7xf32>, %b: tensor<3x7x4xf32>) -> tensor<2x3x5x4xf32> attributes {relax.function} {
  %0 = "relax.matmul"(%a, %b) {out_dtype = "float32"} : (tensor<2x3x5x7xf32>, tensor<3x7x4xf32>) -> tensor<2x3x5x4xf32>
  return %0 : tensor<2x3x5x4xf32>
}

// Not for cuBLASLt: int32, a contraction of unknown size; a bias that is a full matrix (not one
// value per column) stays a relax.add after the offloaded matmul.
// CODEGEN-LABEL: func.func @refused
// CODEGEN: "relax.matmul"(%arg0, %arg1)
// CODEGEN: %[[MM:.+]] = "relax.call_dps_packed"(%arg2, %arg3) {callee = "fused_relax_matmul_cublas{{.*}}"}
// CODEGEN: "relax.add"(%[[MM]], %arg4)
// CODEGEN: "relax.matmul"(%arg5, %arg6)
func.func @refused(%i: tensor<2x3xi32>, %j: tensor<3x5xi32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %m: tensor<4x8xf32>, %y: tensor<4x?xf32>, %v: tensor<?x8xf32>) -> (tensor<2x5xi32>, tensor<4x8xf32>, tensor<4x8xf32>) attributes {relax.function} {
  %0 = "relax.matmul"(%i, %j) {out_dtype = "int32"} : (tensor<2x3xi32>, tensor<3x5xi32>) -> tensor<2x5xi32>
  %1 = "relax.matmul"(%x, %w) {out_dtype = "float32"} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %2 = "relax.add"(%1, %m) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = "relax.matmul"(%y, %v) {out_dtype = "float32"} : (tensor<4x?xf32>, tensor<?x8xf32>) -> tensor<4x8xf32>
  return %0, %2, %3 : tensor<2x5xi32>, tensor<4x8xf32>, tensor<4x8xf32>
}
