// RUN: relaxmlir-opt %s --relax-scalar-operand-loads -split-input-file | FileCheck %s

// One step of a 6 x 16 register tile (AVX2): the A column is read as a vector<6xf32> whose
// lanes only feed AXPYs. Each lane becomes its own scalar load (LLVM's broadcast from memory)
// instead of one 6-lane load that LLVM splits into v4 + v2 and broadcasts from registers.
// CHECK-LABEL: func.func @tile_step
// CHECK-SAME: (%[[A:.+]]: memref<8x6xf32>, %[[B:.+]]: memref<8x16xf32>, %{{.+}}: vector<16xf32>, %[[K:.+]]: index)
// CHECK-NOT: vector.transfer_read %[[A]]
// CHECK: %[[ROW:.+]] = vector.transfer_read %[[B]]
// CHECK: %[[A0:.+]] = memref.load %[[A]][%[[K]], %{{.+}}] : memref<8x6xf32>
// CHECK: vector.outerproduct %[[ROW]], %[[A0]]
// CHECK: %[[J5:.+]] = arith.addi %{{.+}}, %{{.+}} overflow<nsw> : index
// CHECK: %[[A5:.+]] = memref.load %[[A]][%[[K]], %[[J5]]] : memref<8x6xf32>
// CHECK: vector.outerproduct %[[ROW]], %[[A5]]
func.func @tile_step(%a: memref<8x6xf32>, %b: memref<8x16xf32>, %acc: vector<16xf32>, %k: index) -> (vector<16xf32>, vector<16xf32>) {
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %col = vector.transfer_read %a[%k, %c0], %pad {in_bounds = [true]} : memref<8x6xf32>, vector<6xf32>
  %row = vector.transfer_read %b[%k, %c0], %pad {in_bounds = [true]} : memref<8x16xf32>, vector<16xf32>
  %a0 = vector.extract %col[0] : f32 from vector<6xf32>
  %r0 = vector.outerproduct %row, %a0, %acc {kind = #vector.kind<add>} : vector<16xf32>, f32
  %a5 = vector.extract %col[5] : f32 from vector<6xf32>
  %r5 = vector.outerproduct %row, %a5, %acc {kind = #vector.kind<add>} : vector<16xf32>, f32
  return %r0, %r5 : vector<16xf32>, vector<16xf32>
}

// -----

// Reads that stay whole: a lane used by arithmetic, the vector used whole, a masked read.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: vector.transfer_read
// CHECK-NOT: memref.load
func.func @kept(%a: memref<16xf32>, %i: index, %m: vector<4xi1>) -> (f32, vector<4xf32>, f32) {
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %a[%i], %pad {in_bounds = [true]} : memref<16xf32>, vector<4xf32>
  %x = vector.extract %v[1] : f32 from vector<4xf32>
  %y = arith.addf %x, %x : f32
  %w = vector.transfer_read %a[%i], %pad {in_bounds = [true]} : memref<16xf32>, vector<4xf32>
  %u = vector.transfer_read %a[%i], %pad, %m {in_bounds = [true]} : memref<16xf32>, vector<4xf32>
  %z = vector.extract %u[2] : f32 from vector<4xf32>
  %zb = vector.broadcast %z : f32 to vector<4xf32>
  %s = vector.extract %zb[0] : f32 from vector<4xf32>
  return %y, %w, %s : f32, vector<4xf32>, f32
}
