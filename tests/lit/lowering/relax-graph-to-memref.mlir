// RUN: relaxmlir-opt %s -split-input-file -verify-diagnostics --relax-inline-dataflow --relax-graph-to-memref | FileCheck %s

func.func private @add(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>, %out: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %b : tensor<?x4xf32>, tensor<?x4xf32>) outs(%out : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// The graph function becomes one C-interface entry point over memrefs whose last argument is
// the result buffer; the intermediate gets an allocation sized from the symbolic dim `n`, and
// the last call_tir writes straight into the out-parameter.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:[^:]+]]: memref<?x4xf32> {{.*}}, %[[Y:[^:]+]]: memref<?x4xf32> {{.*}}, %[[OUT:[^:]+]]: memref<?x4xf32>)
// CHECK-SAME: attributes {llvm.emit_c_interface, relax.function}
// CHECK: %[[N:.+]] = memref.dim %[[X]], %{{.+}} : memref<?x4xf32>
// CHECK: %[[TMP:.+]] = memref.alloc(%[[N]]) {alignment = 64 : i64} : memref<?x4xf32>
// CHECK: %[[FIRST:.+]] = call @add(
// CHECK: bufferization.materialize_in_destination %[[FIRST]] in restrict writable %[[TMP]]
// CHECK: %[[SECOND:.+]] = call @add(
// CHECK: bufferization.materialize_in_destination %[[SECOND]] in restrict writable %[[OUT]]
// CHECK-NOT: memref.copy
// CHECK: return
func.func @chain(%x: tensor<?x4xf32> {relax.name = "x", relax.shape = ["n", 4]}, %y: tensor<?x4xf32> {relax.name = "y", relax.shape = ["n", 4]}) -> tensor<?x4xf32> attributes {relax.function} {
  %0 = scf.execute_region -> tensor<?x4xf32> no_inline {
    %1 = "relax.call_tir"(%x, %y) {callee = @add, relax.shape = [["n", 4]]} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
    %2 = "relax.call_tir"(%1, %y) {callee = @add, relax.shape = [["n", 4]]} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
    scf.yield %2 : tensor<?x4xf32>
  } {relax.dataflow}
  return %0 : tensor<?x4xf32>
}

// -----

// Constants become private memref globals; packed functions become C-interface declarations
// that the runtime binds to registered functions (Python or native); they take unranked memrefs
// (`{rank, descriptor}` in C), the ranked types are kept in relax.packed_args.
// CHECK-DAG: func.func private @[[PRINT:__packed_env_print_[0-9]+]](memref<*xf32>) attributes {llvm.emit_c_interface, relax.packed = "env.print", relax.packed_args = [memref<2xf32>]
// CHECK-DAG: memref.global "private" constant @[[CONST:__constant_[0-9]+]] : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK-LABEL: func.func @constant_and_packed
// CHECK: %[[C:.+]] = memref.get_global @[[CONST]] : memref<2xf32>
// CHECK: %[[U:.+]] = memref.cast %[[C]] : memref<2xf32> to memref<*xf32>
// CHECK: call @[[PRINT]](%[[U]]) : (memref<*xf32>) -> ()
// CHECK: memref.copy %[[C]], %{{.+}}
func.func @constant_and_packed() -> tensor<2xf32> attributes {relax.function} {
  %c = "relax.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  "relax.call_packed"(%c) {callee = "env.print"} : (tensor<2xf32>) -> ()
  return %c : tensor<2xf32>
}

// -----

func.func @packed_dynamic_without_shape(%x: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.call_dps_packed' result has a dynamic dimension 0 without a relax.shape}}
  %0 = "relax.call_dps_packed"(%x) {callee = "env.relu"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %1 = "relax.call_dps_packed"(%0) {callee = "env.relu"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %1 : tensor<?x4xf32>
}

// -----

// A kernel that only reshapes its input (here a permute of a unit axis, [1, 4, 8] -> [4, 1, 8])
// becomes a view of the input's buffer, not an allocation, a call and a copy; the next kernel
// reads the view. A reshape of the function's result stays a call into the out-parameter.
func.func private @unit_permute(%a: tensor<1x4x8xf32>, %out: tensor<4x1x8xf32>) -> tensor<4x1x8xf32> attributes {relax.prim_func} {
  %s = tensor.extract_slice %a[0, 0, 0] [1, 4, 8] [1, 1, 1] : tensor<1x4x8xf32> to tensor<4x8xf32>
  %r = tensor.insert_slice %s into %out[0, 0, 0] [4, 1, 8] [1, 1, 1] : tensor<4x8xf32> into tensor<4x1x8xf32>
  return %r : tensor<4x1x8xf32>
}
func.func private @double(%a: tensor<4x1x8xf32>, %out: tensor<4x1x8xf32>) -> tensor<4x1x8xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %a : tensor<4x1x8xf32>, tensor<4x1x8xf32>) outs(%out : tensor<4x1x8xf32>) -> tensor<4x1x8xf32>
  return %0 : tensor<4x1x8xf32>
}

// CHECK-LABEL: func.func @reshape_view
// CHECK-SAME: (%[[X:[^:]+]]: memref<1x4x8xf32> {{.*}}, %[[OUT:[^:]+]]: memref<4x1x8xf32>)
// CHECK: %[[FLAT:.+]] = memref.collapse_shape %[[X]] {{\[}}[0, 1, 2]] : memref<1x4x8xf32> into memref<32xf32>
// CHECK: %[[VIEW:.+]] = memref.expand_shape %[[FLAT]] {{\[}}[0, 1, 2]] output_shape [4, 1, 8] : memref<32xf32> into memref<4x1x8xf32>
// CHECK-NOT: call @unit_permute
// CHECK: %[[IN:.+]] = bufferization.to_tensor %[[VIEW]]
// CHECK: call @double(%[[IN]],
// CHECK-LABEL: func.func @reshape_result
// CHECK: call @unit_permute(
func.func @reshape_view(%x: tensor<1x4x8xf32> {relax.name = "x"}) -> tensor<4x1x8xf32> attributes {relax.function} {
  %0 = "relax.call_tir"(%x) {callee = @unit_permute} : (tensor<1x4x8xf32>) -> tensor<4x1x8xf32>
  %1 = "relax.call_tir"(%0) {callee = @double} : (tensor<4x1x8xf32>) -> tensor<4x1x8xf32>
  return %1 : tensor<4x1x8xf32>
}
func.func @reshape_result(%x: tensor<1x4x8xf32> {relax.name = "x"}) -> tensor<4x1x8xf32> attributes {relax.function} {
  %0 = "relax.call_tir"(%x) {callee = @unit_permute} : (tensor<1x4x8xf32>) -> tensor<4x1x8xf32>
  return %0 : tensor<4x1x8xf32>
}

// -----

// Symbolic shapes too: the head split [1, n, 768] -> [1, n, 12, 64] as the schedule leaves it
// (an expand_shape, then whole slices sized by tensor.dim of the out-argument) is a view, its
// symbolic dim taken from the call's relax.shape. Both sides hold n x 768 elements, counted
// from the arguments' relax.shape. A slice that keeps only part of the rows (n - 1 of them)
// stays a call.
func.func private @split_heads(%a: tensor<1x?x768xf32> {relax.shape = [1, "n", 768]}, %out: tensor<1x?x12x64xf32> {relax.shape = [1, "n", 12, 64]}) -> tensor<1x?x12x64xf32> attributes {relax.prim_func} {
  %c1 = arith.constant 1 : index
  %n = tensor.dim %a, %c1 : tensor<1x?x768xf32>
  %m = tensor.dim %out, %c1 : tensor<1x?x12x64xf32>
  %e = tensor.expand_shape %a [[0], [1], [2, 3]] output_shape [1, %n, 12, 64] : tensor<1x?x768xf32> into tensor<1x?x12x64xf32>
  %s = tensor.extract_slice %e[0, 0, 0, 0] [1, %m, 12, 64] [1, 1, 1, 1] : tensor<1x?x12x64xf32> to tensor<?x12x64xf32>
  %r = tensor.insert_slice %s into %out[0, 0, 0, 0] [1, %m, 12, 64] [1, 1, 1, 1] : tensor<?x12x64xf32> into tensor<1x?x12x64xf32>
  return %r : tensor<1x?x12x64xf32>
}
func.func private @split_heads_but_one(%a: tensor<1x?x768xf32> {relax.shape = [1, "n", 768]}, %out: tensor<1x?x12x64xf32> {relax.shape = [1, "n", 12, 64]}) -> tensor<1x?x12x64xf32> attributes {relax.prim_func} {
  %c1 = arith.constant 1 : index
  %n = tensor.dim %a, %c1 : tensor<1x?x768xf32>
  %m = arith.subi %n, %c1 : index
  %e = tensor.expand_shape %a [[0], [1], [2, 3]] output_shape [1, %n, 12, 64] : tensor<1x?x768xf32> into tensor<1x?x12x64xf32>
  %s = tensor.extract_slice %e[0, 0, 0, 0] [1, %m, 12, 64] [1, 1, 1, 1] : tensor<1x?x12x64xf32> to tensor<?x12x64xf32>
  %r = tensor.insert_slice %s into %out[0, 0, 0, 0] [1, %m, 12, 64] [1, 1, 1, 1] : tensor<?x12x64xf32> into tensor<1x?x12x64xf32>
  return %r : tensor<1x?x12x64xf32>
}
func.func private @heads_double(%a: tensor<1x?x12x64xf32> {relax.shape = [1, "n", 12, 64]}, %out: tensor<1x?x12x64xf32> {relax.shape = [1, "n", 12, 64]}) -> tensor<1x?x12x64xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %a : tensor<1x?x12x64xf32>, tensor<1x?x12x64xf32>) outs(%out : tensor<1x?x12x64xf32>) -> tensor<1x?x12x64xf32>
  return %0 : tensor<1x?x12x64xf32>
}

// CHECK-LABEL: func.func @symbolic_reshape_view
// CHECK-SAME: (%[[X:[^:]+]]: memref<1x?x768xf32> {{.*}}, %[[OUT:[^:]+]]: memref<1x?x12x64xf32>)
// CHECK: %[[N:.+]] = memref.dim %[[X]], %c1
// CHECK: %[[FLAT:.+]] = memref.collapse_shape %[[X]] {{\[}}[0, 1, 2]] : memref<1x?x768xf32> into memref<?xf32>
// CHECK: %[[VIEW:.+]] = memref.expand_shape %[[FLAT]] {{\[}}[0, 1, 2, 3]] output_shape [1, %[[N]], 12, 64] : memref<?xf32> into memref<1x?x12x64xf32>
// CHECK-NOT: call @split_heads
// CHECK: %[[IN:.+]] = bufferization.to_tensor %[[VIEW]]
// CHECK: call @heads_double(%[[IN]],
// CHECK-LABEL: func.func @symbolic_partial_slice
// CHECK: call @split_heads_but_one(
func.func @symbolic_reshape_view(%x: tensor<1x?x768xf32> {relax.name = "x", relax.shape = [1, "n", 768]}) -> tensor<1x?x12x64xf32> attributes {relax.function} {
  %0 = "relax.call_tir"(%x) {callee = @split_heads, relax.shape = [[1, "n", 12, 64]]} : (tensor<1x?x768xf32>) -> tensor<1x?x12x64xf32>
  %1 = "relax.call_tir"(%0) {callee = @heads_double, relax.shape = [[1, "n", 12, 64]]} : (tensor<1x?x12x64xf32>) -> tensor<1x?x12x64xf32>
  return %1 : tensor<1x?x12x64xf32>
}
func.func @symbolic_partial_slice(%x: tensor<1x?x768xf32> {relax.name = "x", relax.shape = [1, "n", 768]}) -> tensor<1x?x12x64xf32> attributes {relax.function} {
  %0 = "relax.call_tir"(%x) {callee = @split_heads_but_one, relax.shape = [[1, "n", 12, 64]]} : (tensor<1x?x768xf32>) -> tensor<1x?x12x64xf32>
  %1 = "relax.call_tir"(%0) {callee = @heads_double, relax.shape = [[1, "n", 12, 64]]} : (tensor<1x?x12x64xf32>) -> tensor<1x?x12x64xf32>
  return %1 : tensor<1x?x12x64xf32>
}

// -----

// As many elements is not enough: [4, n] rows and columns of an [n, 4] input (n <= 4) are a
// slice whose sizes differ from the input's dims axis by axis, so the kernel stays a call.
func.func private @swapped_sizes(%a: tensor<?x4xf32> {relax.shape = ["n", 4]}, %out: tensor<4x?xf32> {relax.shape = [4, "n"]}) -> tensor<4x?xf32> attributes {relax.prim_func} {
  %c1 = arith.constant 1 : index
  %n = tensor.dim %out, %c1 : tensor<4x?xf32>
  %s = tensor.extract_slice %a[0, 0] [4, %n] [1, 1] : tensor<?x4xf32> to tensor<4x?xf32>
  %r = tensor.insert_slice %s into %out[0, 0] [4, %n] [1, 1] : tensor<4x?xf32> into tensor<4x?xf32>
  return %r : tensor<4x?xf32>
}
func.func private @double_4n(%a: tensor<4x?xf32> {relax.shape = [4, "n"]}, %out: tensor<4x?xf32> {relax.shape = [4, "n"]}) -> tensor<4x?xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %a : tensor<4x?xf32>, tensor<4x?xf32>) outs(%out : tensor<4x?xf32>) -> tensor<4x?xf32>
  return %0 : tensor<4x?xf32>
}

// CHECK-LABEL: func.func @swapped_slice
// CHECK-NOT: memref.expand_shape
// CHECK: call @swapped_sizes(
func.func @swapped_slice(%x: tensor<?x4xf32> {relax.name = "x", relax.shape = ["n", 4]}) -> tensor<4x?xf32> attributes {relax.function} {
  %0 = "relax.call_tir"(%x) {callee = @swapped_sizes, relax.shape = [[4, "n"]]} : (tensor<?x4xf32>) -> tensor<4x?xf32>
  %1 = "relax.call_tir"(%0) {callee = @double_4n, relax.shape = [[4, "n"]]} : (tensor<4x?xf32>) -> tensor<4x?xf32>
  return %1 : tensor<4x?xf32>
}
