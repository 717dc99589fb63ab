// RUN: relaxmlir-opt %s -split-input-file --relax-combine-slices | FileCheck %s

// An unrolled loop's steps, each reading its own slice of one tensor along axis 1 (8 of them,
// in any order): one split, each step reading its piece.
// CHECK-LABEL: func.func @steps
// CHECK: %[[P:.+]]:8 = "relax.split"(%arg0) {axis = 1 : i64, indices = [1, 2, 3, 4, 5, 6, 7]}
// CHECK-NOT: relax.strided_slice
// CHECK: "relax.add"(%[[P]]#0, %[[P]]#1)
// CHECK: "relax.add"(%{{.+}}, %[[P]]#7)
func.func @steps(%x: tensor<1x8x4xf32>) -> tensor<1x1x4xf32> attributes {relax.function} {
  %s0 = "relax.strided_slice"(%x) {axes = [1], begin = [0], end = [1], strides = [1]} : (tensor<1x8x4xf32>) -> tensor<1x1x4xf32>
  %s1 = "relax.strided_slice"(%x) {axes = [1], begin = [1], end = [2], strides = [1]} : (tensor<1x8x4xf32>) -> tensor<1x1x4xf32>
  %a0 = "relax.add"(%s0, %s1) : (tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  %s2 = "relax.strided_slice"(%x) {axes = [1], begin = [2], end = [3], strides = [1]} : (tensor<1x8x4xf32>) -> tensor<1x1x4xf32>
  %a1 = "relax.add"(%a0, %s2) : (tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  %s3 = "relax.strided_slice"(%x) {axes = [1], begin = [3], end = [4], strides = [1]} : (tensor<1x8x4xf32>) -> tensor<1x1x4xf32>
  %a2 = "relax.add"(%a1, %s3) : (tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  %s5 = "relax.strided_slice"(%x) {axes = [1], begin = [5], end = [6], strides = [1]} : (tensor<1x8x4xf32>) -> tensor<1x1x4xf32>
  %s4 = "relax.strided_slice"(%x) {axes = [1], begin = [4], end = [5], strides = [1]} : (tensor<1x8x4xf32>) -> tensor<1x1x4xf32>
  %a3 = "relax.add"(%a2, %s4) : (tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  %a4 = "relax.add"(%a3, %s5) : (tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  %s6 = "relax.strided_slice"(%x) {axes = [1], begin = [6], end = [7], strides = [1]} : (tensor<1x8x4xf32>) -> tensor<1x1x4xf32>
  %a5 = "relax.add"(%a4, %s6) : (tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  %s7 = "relax.strided_slice"(%x) {axes = [1], begin = [-1], end = [8], strides = [1]} : (tensor<1x8x4xf32>) -> tensor<1x1x4xf32>
  %a6 = "relax.add"(%a5, %s7) : (tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  return %a6 : tensor<1x1x4xf32>
}

// -----

// Four slices (an LSTM step's gates, `chunk(4)`) stay slices: each fuses into its reader.
// CHECK-LABEL: func.func @gates
// CHECK-NOT: relax.split
// CHECK-COUNT-4: relax.strided_slice
func.func @gates(%x: tensor<1x16xf32>) -> tensor<1x4xf32> attributes {relax.function} {
  %g0 = "relax.strided_slice"(%x) {axes = [1], begin = [0], end = [4], strides = [1]} : (tensor<1x16xf32>) -> tensor<1x4xf32>
  %g1 = "relax.strided_slice"(%x) {axes = [1], begin = [4], end = [8], strides = [1]} : (tensor<1x16xf32>) -> tensor<1x4xf32>
  %g2 = "relax.strided_slice"(%x) {axes = [1], begin = [8], end = [12], strides = [1]} : (tensor<1x16xf32>) -> tensor<1x4xf32>
  %g3 = "relax.strided_slice"(%x) {axes = [1], begin = [12], end = [16], strides = [1]} : (tensor<1x16xf32>) -> tensor<1x4xf32>
  %a = "relax.add"(%g0, %g1) : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  %b = "relax.add"(%g2, %g3) : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  %c = "relax.add"(%a, %b) : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  return %c : tensor<1x4xf32>
}

// -----

// Overlapping windows (a strided conv's taps, say) are no pieces of a split.
// CHECK-LABEL: func.func @windows
// CHECK-NOT: relax.split
func.func @windows(%x: tensor<10xf32>) -> tensor<3xf32> attributes {relax.function} {
  %w0 = "relax.strided_slice"(%x) {axes = [0], begin = [0], end = [3], strides = [1]} : (tensor<10xf32>) -> tensor<3xf32>
  %w1 = "relax.strided_slice"(%x) {axes = [0], begin = [1], end = [4], strides = [1]} : (tensor<10xf32>) -> tensor<3xf32>
  %w2 = "relax.strided_slice"(%x) {axes = [0], begin = [2], end = [5], strides = [1]} : (tensor<10xf32>) -> tensor<3xf32>
  %w3 = "relax.strided_slice"(%x) {axes = [0], begin = [3], end = [6], strides = [1]} : (tensor<10xf32>) -> tensor<3xf32>
  %w4 = "relax.strided_slice"(%x) {axes = [0], begin = [4], end = [7], strides = [1]} : (tensor<10xf32>) -> tensor<3xf32>
  %w5 = "relax.strided_slice"(%x) {axes = [0], begin = [5], end = [8], strides = [1]} : (tensor<10xf32>) -> tensor<3xf32>
  %w6 = "relax.strided_slice"(%x) {axes = [0], begin = [6], end = [9], strides = [1]} : (tensor<10xf32>) -> tensor<3xf32>
  %w7 = "relax.strided_slice"(%x) {axes = [0], begin = [7], end = [10], strides = [1]} : (tensor<10xf32>) -> tensor<3xf32>
  %a = "relax.add"(%w0, %w1) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %b = "relax.add"(%w2, %w3) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %c = "relax.add"(%w4, %w5) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %d = "relax.add"(%w6, %w7) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %e = "relax.add"(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %f = "relax.add"(%c, %d) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %g = "relax.add"(%e, %f) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %g : tensor<3xf32>
}
