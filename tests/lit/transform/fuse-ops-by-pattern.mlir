// RUN: relaxmlir-opt %s --relax-fuse-ops-by-pattern=patterns=blas | FileCheck %s --check-prefix=FUSE
// RUN: relaxmlir-opt %s '--relax-fuse-ops-by-pattern=patterns=blas annotate-codegen=1' --relax-run-codegen | FileCheck %s --check-prefix=CODEGEN
// RUN: relaxmlir-opt %s --relax-fuse-ops-by-pattern=patterns=blas --relax-inline-composites | FileCheck %s --check-prefix=INLINE
// RUN: not relaxmlir-opt %s --relax-fuse-ops-by-pattern=patterns=nolib 2>&1 | FileCheck %s --check-prefix=NOPAT

// The longest chain (permute_dims -> matmul -> add -> relu) becomes one composite: the walk
// starts at the last op, so the relu pattern claims the ops before a shorter pattern could. The
// second matmul has an int32 operand: the blas check refuses it.
// FUSE-LABEL: func.func @main
// FUSE: %{{.+}} = call @fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu(%arg0, %arg1, %arg2)
// FUSE: "relax.matmul"(%arg3, %arg4)
// FUSE: func.func private @fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu(%{{.+}}: tensor<4x16xf32> {relax.name = "lhs"}, %{{.+}}: tensor<8x16xf32> {relax.name = "rhs"}, %{{.+}}: tensor<8xf32> {relax.name = "bias"}) -> tensor<4x8xf32> attributes {relax.composite = "blas.matmul_transposed_bias_relu"}
// FUSE-NEXT: "relax.permute_dims"
// FUSE-NEXT: "relax.matmul"
// FUSE-NEXT: "relax.add"
// FUSE-NEXT: "relax.nn_relu"
// FUSE-NEXT: return

// RunCodegen: the call becomes a packed call of the composite's name, bound to a C kernel.
// CODEGEN-LABEL: func.func @main
// CODEGEN: "relax.call_dps_packed"(%arg0, %arg1, %arg2) {callee = "fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_blas"}
// CODEGEN-NOT: func.func private @fused

// Not offloaded: the ops go back where they were.
// INLINE-LABEL: func.func @main
// INLINE-NOT: call @
// INLINE: "relax.permute_dims"(%arg1)
// INLINE: "relax.nn_relu"
// INLINE-NOT: func.func private

// NOPAT: error: relax-fuse-ops-by-pattern: no registered pattern starts with ['nolib']

func.func @main(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>, %i: tensor<2x3xi32>, %j: tensor<3x5xi32>) -> (tensor<4x8xf32>, tensor<2x5xi32>) attributes {relax.function} {
  %0 = "relax.permute_dims"(%w) {axes = [1, 0]} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %1 = "relax.matmul"(%x, %0) {out_dtype = "float32"} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %2 = "relax.add"(%1, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %3 = "relax.nn_relu"(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = "relax.matmul"(%i, %j) {out_dtype = "int32"} : (tensor<2x3xi32>, tensor<3x5xi32>) -> tensor<2x5xi32>
  return %3, %4 : tensor<4x8xf32>, tensor<2x5xi32>
}
