// RUN: relaxmlir-opt %s '--relax-descriptor-arguments{min-buffers=3}' | FileCheck %s
// RUN: relaxmlir-opt %s '--relax-descriptor-arguments' | FileCheck %s --check-prefix=FEW
// RUN: relaxmlir-opt %s '--pass-pipeline=builtin.module(relax-descriptor-arguments{min-buffers=3},finalize-memref-to-llvm,convert-to-llvm,reconcile-unrealized-casts)' | FileCheck %s --check-prefix=LLVM
// RUN: not relaxmlir-opt %s '--relax-descriptor-arguments{min-buffers=many}' 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: relax-descriptor-arguments: min-buffers='many': expected a count

// A graph function with many buffers (a model's weights as arguments) takes a pointer to each
// buffer's descriptor, the C interface's convention, and loads the descriptor right before each
// use: its unpacked fields were thousands of LLVM arguments, all live from the entry. Kernels
// keep their memref arguments.
// CHECK-LABEL: func.func private @k(%{{.+}}: memref<4x8xf32>, %{{.+}}: memref<?x8xf32>)
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.+]]: !llvm.ptr {relax.name = "x"}, %[[W:.+]]: !llvm.ptr {relax.name = "w"}, %[[OUT:.+]]: !llvm.ptr)
// CHECK: %[[XD:.+]] = llvm.load %[[X]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK: %[[XM:.+]] = builtin.unrealized_conversion_cast %[[XD]] : {{.+}} to memref<4x8xf32>
// CHECK: %[[OD:.+]] = llvm.load %[[OUT]]
// CHECK: %[[OM:.+]] = builtin.unrealized_conversion_cast %[[OD]] : {{.+}} to memref<?x8xf32>
// CHECK: call @k(%[[XM]], %[[OM]])
// CHECK: llvm.load %[[W]]
// CHECK: llvm.load %[[OUT]]
// CHECK: call @k(
// CHECK: return

// Below the threshold (65 buffers by default), nothing changes.
// FEW-LABEL: func.func @main
// FEW-SAME: (%{{.+}}: memref<4x8xf32> {relax.name = "x"}, %{{.+}}: memref<4x8xf32> {relax.name = "w"}, %{{.+}}: memref<?x8xf32>)
// FEW-NOT: llvm.load

// In LLVM, the casts fold away: each call reads the fields of a descriptor loaded just before.
// LLVM-LABEL: llvm.func @main
// LLVM-SAME: (%[[X:.+]]: !llvm.ptr {relax.name = "x"}, %[[W:.+]]: !llvm.ptr {relax.name = "w"}, %[[OUT:.+]]: !llvm.ptr)
// LLVM: llvm.load %[[X]]
// LLVM: llvm.load %[[OUT]]
// LLVM: llvm.call @k(
// LLVM: llvm.load %[[W]]
// LLVM: llvm.load %[[OUT]]
// LLVM: llvm.call @k(
// LLVM-NOT: unrealized_conversion_cast
func.func private @k(%a: memref<4x8xf32>, %b: memref<?x8xf32>) attributes {relax.prim_func} {
  return
}
func.func @main(%x: memref<4x8xf32> {relax.name = "x"}, %w: memref<4x8xf32> {relax.name = "w"}, %out: memref<?x8xf32>) attributes {llvm.emit_c_interface, relax.function} {
  call @k(%x, %out) : (memref<4x8xf32>, memref<?x8xf32>) -> ()
  call @k(%w, %out) : (memref<4x8xf32>, memref<?x8xf32>) -> ()
  return
}
