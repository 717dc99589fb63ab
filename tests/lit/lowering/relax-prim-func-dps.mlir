// RUN: relaxmlir-opt %s -split-input-file --relax-prim-func-dps | FileCheck %s

// A result built on a single-use tensor.empty is computed straight into the out-argument.
// CHECK-LABEL: func.func private @result_on_empty
// CHECK-SAME: (%[[A:[^:]+]]: tensor<4xf32>, %[[OUT:[^:]+]]: tensor<4xf32>)
// CHECK: %[[SUM:.+]] = linalg.add ins(%[[A]], %[[A]] : tensor<4xf32>, tensor<4xf32>) outs(%[[OUT]] : tensor<4xf32>)
// CHECK-NOT: materialize_in_destination
// CHECK: return %[[SUM]]
func.func private @result_on_empty(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A result that updates an input in place is copied into the out-argument.
// CHECK-LABEL: func.func private @result_on_input
// CHECK-SAME: (%[[A:[^:]+]]: tensor<4xf32>, %[[OUT:[^:]+]]: tensor<4xf32>)
// CHECK: %[[SUM:.+]] = linalg.add ins(%[[A]], %[[A]] : tensor<4xf32>, tensor<4xf32>) outs(%[[A]] : tensor<4xf32>)
// CHECK: %[[RES:.+]] = bufferization.materialize_in_destination %[[SUM]] in %[[OUT]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: return %[[RES]]
func.func private @result_on_input(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%a : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// An elementwise epilogue over a single-use result updates it in place (matmul -> +bias).
// CHECK-LABEL: func.func private @matmul_bias
// CHECK-SAME: (%{{[^:]+}}: tensor<2x8xf32>, %{{[^:]+}}: tensor<8x4xf32>, %[[BIAS:[^:]+]]: tensor<4xf32>, %[[OUT:[^:]+]]: tensor<2x4xf32>)
// CHECK: %[[FILL:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[OUT]] : tensor<2x4xf32>)
// CHECK: %[[MM:.+]] = linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<2x8xf32>, tensor<8x4xf32>) outs(%[[FILL]] : tensor<2x4xf32>)
// CHECK: %[[EPI:.+]] = linalg.generic {{.*}} ins(%[[BIAS]] : tensor<4xf32>) outs(%[[MM]] : tensor<2x4xf32>)
// CHECK-NOT: tensor.empty
// CHECK: return %[[EPI]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func private @matmul_bias(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>, %bias: tensor<4xf32>, %out: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<2x8xf32>, tensor<8x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%mm, %bias : tensor<2x4xf32>, tensor<4xf32>) outs(%out : tensor<2x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

// Results that already are the out-argument, and functions that are not primitive, stay.
// CHECK-LABEL: func.func private @returns_out
// CHECK-NOT: bufferization.materialize_in_destination
// CHECK: return %{{.+}}
// CHECK-LABEL: func.func @not_a_prim_func
// CHECK: tensor.empty
// CHECK-NOT: bufferization.materialize_in_destination
func.func private @returns_out(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  return %out : tensor<4xf32>
}

func.func @not_a_prim_func(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Two chains may not grow from one tensor.empty (CSE merges equal ones): each user gets its own.
// CHECK-LABEL: func.func private @shared_empty
// CHECK-SAME: (%{{[^:]+}}: tensor<4xf32>, %[[OUT:[^:]+]]: tensor<4xf32>)
// CHECK: tensor.empty() : tensor<4xf32>
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4xf32>
// CHECK: linalg.add ins(%{{.+}}, %{{.+}} : tensor<4xf32>, tensor<4xf32>) outs(%[[E]] : tensor<4xf32>)
// CHECK: linalg.mul ins(%{{.+}}, %{{.+}} : tensor<4xf32>, tensor<4xf32>) outs(%[[OUT]] : tensor<4xf32>)
func.func private @shared_empty(%a: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %1 = linalg.mul ins(%0, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A result that is a reshape of a computation on a fresh tensor (attention's heads permuted
// back to rows, then merged: [2, 3, 4] -> [2, 1, 3, 4] -> [2, 12]) computes into the matching
// view of the out-argument and returns that view: no temporary, no copy into the out-argument.
// CHECK-LABEL: func.func private @result_through_reshape
// CHECK-SAME: (%[[A:[^:]+]]: tensor<3x2x4xf32>, %[[OUT:[^:]+]]: tensor<2x12xf32>)
// CHECK: %[[FLAT:.+]] = tensor.collapse_shape %[[OUT]] {{\[}}[0, 1]] : tensor<2x12xf32> into tensor<24xf32>
// CHECK: %[[VIEW:.+]] = tensor.expand_shape %[[FLAT]] {{\[}}[0, 1, 2]] output_shape [2, 3, 4] : tensor<24xf32> into tensor<2x3x4xf32>
// CHECK: %[[T:.+]] = linalg.generic {{.*}} ins(%[[A]] : tensor<3x2x4xf32>) outs(%[[VIEW]] : tensor<2x3x4xf32>)
// CHECK: %[[F:.+]] = tensor.collapse_shape %[[T]] {{\[}}[0, 1, 2]] : tensor<2x3x4xf32> into tensor<24xf32>
// CHECK: %[[R:.+]] = tensor.expand_shape %[[F]] {{\[}}[0, 1]] output_shape [2, 12] : tensor<24xf32> into tensor<2x12xf32>
// CHECK-NOT: insert_slice
// CHECK-NOT: materialize_in_destination
// CHECK: return %[[R]]
#perm_in = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
#perm_out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func private @result_through_reshape(%a: tensor<3x2x4xf32>, %out: tensor<2x12xf32>) -> tensor<2x12xf32> attributes {relax.prim_func} {
  %e = tensor.empty() : tensor<2x3x4xf32>
  %t = linalg.generic {indexing_maps = [#perm_in, #perm_out], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : tensor<3x2x4xf32>) outs(%e : tensor<2x3x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<2x3x4xf32>
  %u = tensor.empty() : tensor<2x1x3x4xf32>
  %i = tensor.insert_slice %t into %u[0, 0, 0, 0] [2, 1, 3, 4] [1, 1, 1, 1] : tensor<2x3x4xf32> into tensor<2x1x3x4xf32>
  %c = tensor.collapse_shape %i [[0], [1, 2, 3]] : tensor<2x1x3x4xf32> into tensor<2x12xf32>
  return %c : tensor<2x12xf32>
}

// -----

// An input slice put into a fresh tensor of unit axes and only reshaped after (TE's squeeze of a
// strided_slice, Q of a fused [3, S, 1, D] tensor) is read as a reshape of the slice, not a copy.
// CHECK-LABEL: func.func private @unit_axes_of_a_slice
// CHECK-SAME: (%[[A:[^:]+]]: tensor<3x4x1x8xf32>, %[[OUT:[^:]+]]: tensor<4x8xf32>)
// CHECK: %[[S:.+]] = tensor.extract_slice %[[A]][0, 0, 0, 0] [1, 4, 1, 8] [1, 1, 1, 1] : tensor<3x4x1x8xf32> to tensor<4x8xf32>
// CHECK-NOT: tensor.insert_slice
// CHECK: %[[F:.+]] = tensor.collapse_shape %[[S]] {{\[}}[0, 1]] : tensor<4x8xf32> into tensor<32xf32>
// CHECK: %[[V:.+]] = tensor.expand_shape %[[F]] {{\[}}[0, 1, 2]] output_shape [4, 1, 8] : tensor<32xf32> into tensor<4x1x8xf32>
// CHECK: tensor.collapse_shape %[[V]] {{\[}}[0, 1], [2]] : tensor<4x1x8xf32> into tensor<4x8xf32>
func.func private @unit_axes_of_a_slice(%a: tensor<3x4x1x8xf32>, %out: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {relax.prim_func} {
  %s = tensor.extract_slice %a[0, 0, 0, 0] [1, 4, 1, 8] [1, 1, 1, 1] : tensor<3x4x1x8xf32> to tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x1x8xf32>
  %i = tensor.insert_slice %s into %e[0, 0, 0] [4, 1, 8] [1, 1, 1] : tensor<4x8xf32> into tensor<4x1x8xf32>
  %c = tensor.collapse_shape %i [[0, 1], [2]] : tensor<4x1x8xf32> into tensor<4x8xf32>
  %r = linalg.add ins(%c, %c : tensor<4x8xf32>, tensor<4x8xf32>) outs(%out : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
