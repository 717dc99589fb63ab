// RUN: relaxmlir-opt %s --relax-profile-hooks | FileCheck %s

// Every call of an entry point (a relax.function) is bracketed by the runtime's timers, named by
// a NUL-terminated string: the callee's symbol, or the registered name of a packed function.
// Kernels (no relax.function attribute) are left alone.
// CHECK-DAG: func.func private @relaxmlir_profile_begin(i64)
// CHECK-DAG: func.func private @relaxmlir_profile_end(i64)
// CHECK-DAG: memref.global "private" constant @[[ADD:__profile_name_[0-9]+]] : memref<4xi8> = dense<[97, 100, 100, 0]>
// CHECK-DAG: memref.global "private" constant @[[PRINT:__profile_name_[0-9]+]] : memref<10xi8> = dense<[101, 110, 118, 46, 112, 114, 105, 110, 116, 0]>
// CHECK-LABEL: func.func @add
// CHECK-NOT: relaxmlir_profile
// CHECK: return
// CHECK-LABEL: func.func @main
// CHECK: %[[G1:.+]] = memref.get_global @[[ADD]] : memref<4xi8>
// CHECK: %[[P1:.+]] = memref.extract_aligned_pointer_as_index %[[G1]]
// CHECK: %[[N1:.+]] = arith.index_cast %[[P1]] : index to i64
// CHECK: call @relaxmlir_profile_begin(%[[N1]]) : (i64) -> ()
// CHECK-NEXT: call @add(
// CHECK-NEXT: call @relaxmlir_profile_end(%[[N1]]) : (i64) -> ()
// CHECK: %[[G2:.+]] = memref.get_global @[[PRINT]] : memref<10xi8>
// CHECK: call @relaxmlir_profile_begin(
// CHECK-NEXT: call @__packed_env_print_0(
// CHECK-NEXT: call @relaxmlir_profile_end(
// CHECK: return
func.func private @__packed_env_print_0(memref<*xf32>) attributes {llvm.emit_c_interface, relax.packed = "env.print"}

func.func @add(%a: memref<4xf32>, %b: memref<4xf32>, %out: memref<4xf32>) attributes {relax.prim_func} {
  linalg.add ins(%a, %b : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>)
  return
}

func.func @main(%x: memref<4xf32>, %out: memref<4xf32>) attributes {llvm.emit_c_interface, relax.function} {
  call @add(%x, %x, %out) : (memref<4xf32>, memref<4xf32>, memref<4xf32>) -> ()
  %u = memref.cast %out : memref<4xf32> to memref<*xf32>
  call @__packed_env_print_0(%u) : (memref<*xf32>) -> ()
  return
}
