// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// reshape with a symbolic batch: the kernel recomputes indices from the dynamic sizes.
// CHECK-LABEL: func.func @reshape_symbolic
// CHECK: "relax.call_tir"(%{{.+}}) {callee = @[[FN:[a-z_0-9]+]], relax.shape = {{\[}}["n", 6]]} : (tensor<?x2x3xf32>) -> tensor<?x6xf32>
// CHECK: func.func private @[[FN]](%{{.+}}: tensor<?x2x3xf32> {relax.shape = ["n", 2, 3]}, %{{.+}}: tensor<?x6xf32> {relax.shape = ["n", 6]})
// CHECK: tensor.extract
func.func @reshape_symbolic(%x: tensor<?x2x3xf32> {relax.name = "x", relax.shape = ["n", 2, 3]}) -> tensor<?x6xf32> attributes {relax.function} {
  %0 = "relax.reshape"(%x) {shape = ["n", 6], relax.shape = [["n", 6]]} : (tensor<?x2x3xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// -----

// A transpose is a permuted indexing map, no data-dependent reads.
// CHECK-DAG: #[[PERM:.+]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func.func @permute_dims
// CHECK: "relax.call_tir"(%{{.+}}) {callee = @[[FN:[a-z_0-9]+]]}
// CHECK: func.func private @[[FN]](
// CHECK: linalg.generic {indexing_maps = [#[[PERM]], #{{.+}}]
// CHECK-NOT: tensor.extract
func.func @permute_dims(%x: tensor<3x4xf32>) -> tensor<4x3xf32> attributes {relax.function} {
  %0 = "relax.permute_dims"(%x) {axes = [1, 0]} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// split is one call_tir with one result per piece; each piece reads a slice.
// CHECK-LABEL: func.func @split
// CHECK: %[[PARTS:.+]]:2 = "relax.call_tir"(%{{.+}}) {callee = @[[FN:[a-z_0-9]+]], relax.shape = {{\[}}["n", 2], ["n", 4]]} : (tensor<?x6xf32>) -> (tensor<?x2xf32>, tensor<?x4xf32>)
// CHECK: return %[[PARTS]]#0, %[[PARTS]]#1
// CHECK: func.func private @[[FN]](
// CHECK: tensor.extract_slice %{{.+}}[0, 0] [%{{.+}}, 2] [1, 1]
// CHECK: tensor.extract_slice %{{.+}}[0, 2] [%{{.+}}, 4] [1, 1]
func.func @split(%x: tensor<?x6xf32> {relax.name = "x", relax.shape = ["n", 6]}) -> (tensor<?x2xf32>, tensor<?x4xf32>) attributes {relax.function} {
  %0:2 = "relax.split"(%x) {indices = [2], axis = 1, relax.shape = [["n", 2], ["n", 4]]} : (tensor<?x6xf32>) -> (tensor<?x2xf32>, tensor<?x4xf32>)
  return %0#0, %0#1 : tensor<?x2xf32>, tensor<?x4xf32>
}

// -----

// concat reads every input under a select on the axis index.
// CHECK-LABEL: func.func @concat
// CHECK: "relax.call_tir"(%[[A:.+]], %[[B:.+]]) {callee = @[[FN:[a-z_0-9]+]]} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
// CHECK: func.func private @[[FN]](
// CHECK: arith.cmpi
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>) -> tensor<2x4xf32> attributes {relax.function} {
  %0 = "relax.concat"(%a, %b) {axis = 1} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// A reshape to an empty tensor reads nothing: a fill (as any op with an empty result), no index
// arithmetic into the input.
// CHECK-LABEL: func.func @reshape_empty
// CHECK: func.func private @{{[a-z_0-9]+}}(%{{[^:]+}}: tensor<0x3xf32>)
// CHECK: linalg.generic
// CHECK-NOT: ins(
// CHECK: arith.constant 0.0
func.func @reshape_empty(%x: tensor<0xf32>) -> tensor<0x3xf32> attributes {relax.function} {
  %0 = "relax.reshape"(%x) {shape = [0, 3]} : (tensor<0xf32>) -> tensor<0x3xf32>
  return %0 : tensor<0x3xf32>
}
