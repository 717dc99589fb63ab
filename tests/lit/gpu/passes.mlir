// RUN: relaxmlir-opt %s -split-input-file --relax-gpu-private-buffers | FileCheck %s --check-prefix=PRIVATE
// RUN: relaxmlir-opt %s -split-input-file --relax-gpu-map | FileCheck %s --check-prefix=MAP
// RUN: relaxmlir-opt %s -split-input-file --relax-gpu-host-memory | FileCheck %s --check-prefix=HOST
// RUN: relaxmlir-opt %s -split-input-file --relax-gpu-record-constants --finalize-memref-to-llvm \
// RUN:   --convert-func-to-llvm --reconcile-unrealized-casts --relax-gpu-device-constants \
// RUN:   | FileCheck %s --check-prefix=CONST

// A temporary inside a thread's tile is thread-private: an alloca, never freed.
// PRIVATE-LABEL: func.func private @tile_temp
// Buffers outside kernels stay device allocations.
// PRIVATE: memref.alloc() : memref<8xf32>
// PRIVATE: scf.forall
// PRIVATE: %[[T:.+]] = memref.alloca() : memref<4x4xf32>
// PRIVATE-NOT: memref.alloc(
// PRIVATE: linalg.fill ins(%{{.+}} : f32) outs(%[[T]] : memref<4x4xf32>)
// A partial tile's temporary keeps its dynamic size.
// PRIVATE: memref.alloca(%{{.+}}) : memref<?xf32>
func.func private @tile_temp(%n: index) {
  %zero = arith.constant 0.0 : f32
  %outer = memref.alloc() : memref<8xf32>
  scf.forall (%i, %j) in (16, 16) {
    %t = memref.alloc() : memref<4x4xf32>
    linalg.fill ins(%zero : f32) outs(%t : memref<4x4xf32>)
    %d = memref.alloc(%n) : memref<?xf32>
    linalg.fill ins(%zero : f32) outs(%d : memref<?xf32>)
  } {mapping = [#gpu.thread<y>, #gpu.thread<x>]}
  return
}

// -----

// Block foralls become gpu.launch ops whose grid is the trip count (a dynamic one too), with the
// block size the schedule recorded; thread foralls map to thread ids; in-kernel copies become
// linalg.copy (loops later).
// MAP-LABEL: func.func private @kernel
// MAP-SAME: (%[[X:.+]]: memref<?x256xf32>, %[[Y:.+]]: memref<?x256xf32>)
// MAP: %[[N:.+]] = memref.dim %[[X]]
// MAP: gpu.launch blocks(%[[B:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %[[N]], %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) threads(%[[T:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %[[C256:.+]], %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}})
// MAP: memref.subview %[[X]][%[[B]], %{{.+}}]
// MAP: linalg.copy
// MAP: gpu.terminator
// MAP-NOT: scf.forall
func.func private @kernel(%x: memref<?x256xf32>, %y: memref<?x256xf32>) attributes {relax.prim_func, relax.gpu_block_dims = array<i64: 256, 1, 1>} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x256xf32>
  scf.forall (%i) in (%n) {
    scf.forall (%j) in (256) {
      %a = memref.subview %x[%i, %j] [1, 1] [1, 1] : memref<?x256xf32> to memref<1x1xf32, strided<[256, 1], offset: ?>>
      %b = memref.subview %y[%i, %j] [1, 1] [1, 1] : memref<?x256xf32> to memref<1x1xf32, strided<[256, 1], offset: ?>>
      memref.copy %a, %b : memref<1x1xf32, strided<[256, 1], offset: ?>> to memref<1x1xf32, strided<[256, 1], offset: ?>>
    } {mapping = [#gpu.thread<x>]}
  } {mapping = [#gpu.block<x>]}
  return
}

// -----

// A "serial" kernel (a scalar result) is one 1x1x1 launch; its temporaries are the thread's own.
// MAP-LABEL: func.func private @total
// MAP: gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %[[ONE:.+]], %{{.+}} = %[[ONE]], %{{.+}} = %[[ONE]]) threads(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %[[ONE]], %{{.+}} = %[[ONE]], %{{.+}} = %[[ONE]])
// MAP: memref.alloca() : memref<f32>
// MAP: linalg.generic
// MAP-NOT: memref.dealloc
// MAP: linalg.copy
// MAP: gpu.terminator
// MAP-NEXT: }
// MAP-NEXT: return
func.func private @total(%x: memref<8x8xf32>, %out: memref<f32>) attributes {relax.prim_func, relax.gpu_block_dims = array<i64: 1, 1, 1>, relax.schedule = ["serial"]} {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<f32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<f32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%x : memref<8x8xf32>) outs(%acc : memref<f32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %a, %v : f32
    linalg.yield %s : f32
  }
  memref.copy %acc, %out : memref<f32> to memref<f32>
  memref.dealloc %acc : memref<f32>
  return
}

// -----

// Host code handles device buffers: allocations, frees and copies are stream-ordered gpu ops.
// HOST-LABEL: func.func @main
// HOST: %[[T0:.+]] = gpu.wait async
// HOST: %[[BUF:.+]], %[[T1:.+]] = gpu.alloc async [%[[T0]]] () : memref<64xf32>
// HOST: gpu.wait [%[[T1]]]
// HOST: %[[T2:.+]] = gpu.wait async
// HOST: %[[T3:.+]] = gpu.memcpy async [%[[T2]]] %{{.+}}, %[[BUF]] : memref<64xf32>, memref<64xf32>
// HOST: %[[T4:.+]] = gpu.wait async
// HOST: gpu.dealloc async [%[[T4]]] %[[BUF]] : memref<64xf32>
// HOST-NOT: memref.alloc
func.func @main(%x: memref<64xf32>, %out: memref<64xf32>) attributes {relax.function} {
  %buf = memref.alloc() : memref<64xf32>
  memref.copy %buf, %out : memref<64xf32> to memref<64xf32>
  memref.dealloc %buf : memref<64xf32>
  return
}

// -----

// Host code reads a constant through its device copy (uploaded once per context by the runtime).
// CONST: llvm.mlir.global private constant @__constant_w
// CONST-LABEL: llvm.func @uses_weight
// CONST: %[[HPTR:.+]] = llvm.mlir.addressof @__constant_w : !llvm.ptr
// CONST: %[[BYTES:.+]] = llvm.mlir.constant(2048 : i64) : i64
// CONST: %[[DEV:.+]] = llvm.call @relaxmlir_cuda_constant(%[[HPTR]], %[[BYTES]]) : (!llvm.ptr, i64) -> !llvm.ptr
// CONST: llvm.getelementptr %[[DEV]]
// CONST: llvm.func @relaxmlir_cuda_constant(!llvm.ptr, i64) -> !llvm.ptr
memref.global "private" constant @__constant_w : memref<16x32xf32> = dense<1.0>
func.func @uses_weight() -> memref<16x32xf32> {
  %w = memref.get_global @__constant_w : memref<16x32xf32>
  return %w : memref<16x32xf32>
}
