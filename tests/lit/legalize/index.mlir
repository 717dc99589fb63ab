// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// take reads the table at data-dependent rows (tensor.extract); negative indices wrap once.
// CHECK-LABEL: func.func @take_embedding
// CHECK-SAME: (%[[TABLE:[^:]+]]: tensor<10x4xf32>, %[[IDS:[^:]+]]: tensor<?x?xi64> {{.*}})
// CHECK: "relax.call_tir"(%[[TABLE]], %[[IDS]]) {callee = @[[FN:[a-z_0-9]+]], relax.shape = {{\[}}["b", "s", 4]]}
// CHECK: func.func private @[[FN]](
// CHECK: arith.cmpi slt
// CHECK: tensor.extract
func.func @take_embedding(%table: tensor<10x4xf32>, %ids: tensor<?x?xi64> {relax.name = "ids", relax.shape = ["b", "s"]}) -> tensor<?x?x4xf32> attributes {relax.function} {
  %0 = "relax.take"(%table, %ids) {axis = 0, mode = "fast", relax.shape = [["b", "s", 4]]} : (tensor<10x4xf32>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
  return %0 : tensor<?x?x4xf32>
}

// -----

// A strided slice is a strided view of the input (offset 1, stride 2), read by a copy.
// CHECK-LABEL: func.func @strided_slice
// CHECK: func.func private @[[FN:[a-z_0-9]+]](
// CHECK: tensor.extract_slice %{{.+}}[1, 0] [3, 4] [2, 1]
// CHECK: linalg.generic
func.func @strided_slice(%x: tensor<7x4xf32>) -> tensor<3x4xf32> attributes {relax.function} {
  %0 = "relax.strided_slice"(%x) {axes = [0], begin = [1], end = [7], strides = [2]} : (tensor<7x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// gather_elements reads data at an index loaded from `indices` (negative ones wrapped);
// scatter_elements finds the last update aimed at each element with a max-reduction over the
// index axis, then selects it or keeps the data.
// CHECK-LABEL: func.func @gather_scatter
// CHECK: func.func private @[[GATHER:[a-z_0-9]+]](
// CHECK: arith.index_cast
// CHECK: tensor.extract
// CHECK: func.func private @[[SCATTER:[a-z_0-9]+]](
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.maxsi
// CHECK: iterator_types = ["parallel", "parallel"]
func.func @gather_scatter(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>, %u: tensor<2x2xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.gather_elements"(%x, %i) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  %1 = "relax.scatter_elements"(%x, %i, %u) {axis = 1 : i64, reduction = "update"} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// An empty strided slice past the end (x[:, 4:0:2] of 3 columns; python clamps the start to 3)
// is a fill: every op with an empty result reads nothing (no out-of-bounds tensor.extract_slice).
// CHECK-LABEL: func.func @strided_slice_empty_past_the_end
// CHECK: func.func private @{{[a-z_0-9]+}}(
// CHECK-NOT: tensor.extract_slice
// CHECK: linalg.generic {{.*}} outs(%{{.+}} : tensor<3x0xi64>)
// CHECK: arith.constant 0 : i64
func.func @strided_slice_empty_past_the_end(%x: tensor<3x3xi64>) -> tensor<3x0xi64> attributes {relax.function} {
  %0 = "relax.strided_slice"(%x) {axes = [1], begin = [4], end = [0], strides = [2]} : (tensor<3x3xi64>) -> tensor<3x0xi64>
  return %0 : tensor<3x0xi64>
}

// -----

// The empty last part of a split (columns 3: of 3) is a view of nothing: tensor.empty, not a
// tensor.extract_slice at offset 3 (out of bounds for the verifier).
// CHECK-LABEL: func.func @split_empty_last_part
// CHECK: func.func private @{{[a-z_0-9]+}}(
// CHECK-NOT: tensor.extract_slice
// CHECK: tensor.empty() : tensor<3x0xf32>
func.func @split_empty_last_part(%x: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3x0xf32>) attributes {relax.function} {
  %0:2 = "relax.split"(%x) {axis = 1, indices = [3]} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3x0xf32>)
  return %0#0, %0#1 : tensor<3x3xf32>, tensor<3x0xf32>
}
