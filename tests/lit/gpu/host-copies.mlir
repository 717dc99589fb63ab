// RUN: relaxmlir-opt %s --relax-gpu-host-copies | FileCheck %s

// A host-side copy out of a strided view (every third element) into a contiguous buffer: no
// driver copy takes a strided view, so it becomes a device kernel, one thread per element
// (ceil(5 / 256) = 1 block of 256, guarded). A copy between identity layouts stays a
// memref.copy (relax-gpu-host-memory makes it a gpu.memcpy).
// CHECK-LABEL: func.func @strided
// CHECK-NOT: memref.copy
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %{{.+}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads({{.*}}) in (%{{.+}} = %c256
// CHECK: arith.cmpi ult
// CHECK: scf.if
// CHECK: %[[V:.+]] = memref.load %arg0
// CHECK: memref.store %[[V]], %arg1
// CHECK: gpu.terminator
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy %arg0, %arg1
func.func @strided(%src: memref<5xf32, strided<[3]>>, %dst: memref<5xf32>) {
  memref.copy %src, %dst : memref<5xf32, strided<[3]>> to memref<5xf32>
  return
}

func.func @contiguous(%src: memref<5xf32>, %dst: memref<5xf32>) {
  memref.copy %src, %dst : memref<5xf32> to memref<5xf32>
  return
}
