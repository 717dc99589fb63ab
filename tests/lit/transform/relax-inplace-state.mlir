// RUN: relaxmlir-opt %s -split-input-file --relax-inplace-state="target=llvm" | FileCheck %s
// RUN: relaxmlir-opt %s -split-input-file --relax-inplace-state="target=llvm" --relax-legalize-ops --relax-inline-dataflow --relax-graph-to-memref | FileCheck %s --check-prefix=MEMREF

// A static KV cache written at `pos` (index_copy) and read back: the cache's only reader is the
// write, whose result is the cache's new value, so the write becomes an in-place call of a
// kernel that copies only the indexed rows (a position outside the axis is skipped) and the
// state is named `inplace`.
// CHECK-LABEL: func.func private @__inplace_index_copy_0
// CHECK-SAME: (%[[I:.+]]: tensor<1xi64>, %[[S:.+]]: tensor<1x1x2xf32>, %[[D:.+]]: tensor<1x4x2xf32>) -> tensor<1x4x2xf32> attributes {relax.prim_func}
// CHECK: scf.for %[[J:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[ACC:.+]] = %[[D]])
// CHECK:   %[[P:.+]] = tensor.extract %[[I]][%[[J]]]
// CHECK:   arith.cmpi sge, %[[P]]
// CHECK:   arith.cmpi slt, %[[P]]
// CHECK:   scf.if
// CHECK:     %[[ROW:.+]] = tensor.extract_slice %[[S]][0, %[[J]], 0] [1, 1, 2] [1, 1, 1]
// CHECK:     tensor.insert_slice %[[ROW]] into %[[ACC]][0, %{{.+}}, 0] [1, 1, 2] [1, 1, 1]
// CHECK:   } else {
// CHECK:     scf.yield %[[ACC]]
// CHECK-LABEL: func.func @main(
// CHECK-SAME: relax.state = {init = "main_initial_state", inplace = ["cache"], params = ["cache"]}
// CHECK: %[[NEW:.+]] = "relax.call_tir_inplace"(%arg1, %arg0, %arg2) {callee = @__inplace_index_copy_0}
// CHECK-NOT: relax.index_copy
// CHECK: "relax.matmul"(%arg0, %{{.+}})
// CHECK: return %{{.+}}#0, %{{.+}}#1

// The entry point has no out-parameter for the cache: the kernel writes the parameter's buffer,
// and the attention reads that buffer.
// MEMREF-LABEL: func.func @main(
// MEMREF-SAME: %{{.+}}: memref<1x1x2xf32> {relax.name = "x"}, %{{.+}}: memref<1xi64> {relax.name = "pos"}, %[[CACHE:.+]]: memref<1x4x2xf32> {relax.name = "cache"}, %{{.+}}: memref<1x1x4xf32>)
// MEMREF: %[[C:.+]] = bufferization.to_tensor %[[CACHE]] restrict writable
// MEMREF: call @__inplace_index_copy_0(%{{.+}}, %{{.+}}, %[[C]])
// MEMREF: bufferization.materialize_in_destination %{{.+}} in restrict writable %[[CACHE]]
// MEMREF: bufferization.to_tensor %[[CACHE]] restrict :
// MEMREF: call @permute_dims
// MEMREF-NOT: memref.copy
// MEMREF: return
func.func @main(%x: tensor<1x1x2xf32> {relax.name = "x"}, %pos: tensor<1xi64> {relax.name = "pos"}, %cache: tensor<1x4x2xf32> {relax.name = "cache"}) -> (tensor<1x1x4xf32>, tensor<1x4x2xf32>) attributes {relax.function, relax.state = {init = "main_initial_state", params = ["cache"]}} {
  %r:2 = scf.execute_region -> (tensor<1x1x4xf32>, tensor<1x4x2xf32>) no_inline {
    %new = "relax.index_copy"(%cache, %pos, %x) {axis = 1 : i64} : (tensor<1x4x2xf32>, tensor<1xi64>, tensor<1x1x2xf32>) -> tensor<1x4x2xf32>
    %t = "relax.permute_dims"(%new) {axes = [0, 2, 1]} : (tensor<1x4x2xf32>) -> tensor<1x2x4xf32>
    %s = "relax.matmul"(%x, %t) {out_dtype = "float32"} : (tensor<1x1x2xf32>, tensor<1x2x4xf32>) -> tensor<1x1x4xf32>
    scf.yield %s, %new : tensor<1x1x4xf32>, tensor<1x4x2xf32>
  } {relax.dataflow}
  return %r#0, %r#1 : tensor<1x1x4xf32>, tensor<1x4x2xf32>
}

func.func @main_initial_state() -> tensor<1x4x2xf32> attributes {relax.function} {
  %0 = "relax.constant"() {value = dense<0.0> : tensor<1x4x2xf32>} : () -> tensor<1x4x2xf32>
  return %0 : tensor<1x4x2xf32>
}

// -----

// The old cache is read after the write too: it must survive the call, so the write stays a
// copy (index_copy) and the state keeps its out-parameter.
// CHECK-LABEL: func.func @main(
// CHECK-NOT: inplace
// CHECK: "relax.index_copy"(%arg2, %arg1, %arg0)
// CHECK-NOT: relax.call_tir_inplace
// MEMREF-LABEL: func.func @main(
// MEMREF-SAME: %{{.+}}: memref<1x4x2xf32> {relax.name = "cache"}, %{{.+}}: memref<1x4x2xf32>, %{{.+}}: memref<1x4x2xf32>)
func.func @main(%x: tensor<1x1x2xf32> {relax.name = "x"}, %pos: tensor<1xi64> {relax.name = "pos"}, %cache: tensor<1x4x2xf32> {relax.name = "cache"}) -> (tensor<1x4x2xf32>, tensor<1x4x2xf32>) attributes {relax.function, relax.state = {init = "main_initial_state", params = ["cache"]}} {
  %new = "relax.index_copy"(%cache, %pos, %x) {axis = 1 : i64} : (tensor<1x4x2xf32>, tensor<1xi64>, tensor<1x1x2xf32>) -> tensor<1x4x2xf32>
  %d = "relax.subtract"(%new, %cache) : (tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  return %d, %new : tensor<1x4x2xf32>, tensor<1x4x2xf32>
}

func.func @main_initial_state() -> tensor<1x4x2xf32> attributes {relax.function} {
  %0 = "relax.constant"() {value = dense<0.0> : tensor<1x4x2xf32>} : () -> tensor<1x4x2xf32>
  return %0 : tensor<1x4x2xf32>
}
