// RUN: relaxmlir-opt %s --relax-prefetch-next-block -split-input-file | FileCheck %s

// A rows-route GEMM over B in column blocks of 2 panels (4 row tiles of 8 rows, K = 64, panels
// of 32 columns): while a block is computed, each step prefetches 8 floats further into the
// next block (the first panel of the next block: this panel's index - p + 2, the last block
// clamped to itself), (row tile * 2 + panel) * 512 + k * 8 elements into it, through a flat
// view of B. The annotation goes.
// CHECK-LABEL: func.func @blocks
// CHECK-SAME: (%{{.+}}: memref<32x64xf32>, %[[B:.+]]: memref<8x64x32xf32>
// CHECK: %[[FLAT:.+]] = memref.collapse_shape %[[B]] {{\[\[}}0, 1, 2]] : memref<8x64x32xf32> into memref<16384xf32>
// CHECK: scf.for %{{.+}} = %c0 to %c8 step %c2 {
// CHECK: scf.for %[[R:.+]] = %c0 to %c32 step %c8 {
// CHECK: scf.for %[[P:.+]] = %c0 to %c2 step %c1 {
// CHECK: scf.for %[[K:.+]] = %c0 to %c64 step %c1
// CHECK: %[[PANEL:.+]] = arith.addi
// CHECK: vector.transfer_read %[[B]][%[[PANEL]], %[[K]], %c0]
// CHECK: %[[PER_STEP:.+]] = arith.constant 8 : index
// CHECK: %[[SEGMENT:.+]] = arith.constant 512 : index
// CHECK: %[[ROW:.+]] = arith.divui %[[R]], %{{.+}} : index
// CHECK: %[[FIRST:.+]] = arith.subi %[[PANEL]], %[[P]] : index
// CHECK: %[[NEXT:.+]] = arith.addi %[[FIRST]], %{{.+}} : index
// CHECK: %[[LAST:.+]] = arith.constant 6 : index
// CHECK: %[[START:.+]] = arith.minui %[[NEXT]], %[[LAST]] : index
// CHECK: arith.muli %{{.+}}, %[[SEGMENT]] : index
// CHECK: arith.muli %[[K]], %[[PER_STEP]] : index
// CHECK: %[[BLOCK_END:.+]] = arith.constant 4095 : index
// CHECK: %[[PANEL_SIZE:.+]] = arith.constant 2048 : index
// CHECK: arith.muli %[[START]], %[[PANEL_SIZE]] : index
// CHECK: memref.prefetch %[[FLAT]][%{{.+}}], read, locality<2>, data : memref<16384xf32>
// CHECK-NEXT: vector.outerproduct
// CHECK-NOT: relax.prefetch_next_block
func.func @blocks(%a: memref<32x64xf32>, %b: memref<8x64x32xf32>, %c: memref<32x8x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %pad = ub.poison : f32
  %zero = arith.constant dense<0.0> : vector<32xf32>
  scf.for %j = %c0 to %c8 step %c2 {
    scf.for %r = %c0 to %c32 step %c8 {
      scf.for %p = %c0 to %c2 step %c1 {
        %acc = scf.for %k = %c0 to %c64 step %c1 iter_args(%s = %zero) -> (vector<32xf32>) {
          %x = memref.load %a[%r, %k] : memref<32x64xf32>
          %panel = arith.addi %j, %p : index
          %row = vector.transfer_read %b[%panel, %k, %c0], %pad {in_bounds = [true]} : memref<8x64x32xf32>, vector<32xf32>
          %t = vector.outerproduct %row, %x, %s {kind = #vector.kind<add>} : vector<32xf32>, f32
          scf.yield %t : vector<32xf32>
        }
        %panel = arith.addi %j, %p : index
        vector.transfer_write %acc, %c[%r, %panel, %c0] {in_bounds = [true]} : vector<32xf32>, memref<32x8x32xf32>
      }
    }
  } {relax.prefetch_next_block}
  return
}

// -----

// 32 row tiles: the first 16 fetch the next block, 2 floats (8 bytes) a step, behind a test of
// the row tile's number; the others only compute.
// CHECK-LABEL: func.func @many_rows
// CHECK: scf.for %[[K:.+]] = %c0 to %c64 step %c1
// CHECK: %[[PER_STEP:.+]] = arith.constant 2 : index
// CHECK: arith.constant 128 : index
// CHECK: %[[TILE:.+]] = arith.divui
// CHECK: arith.muli %[[K]], %[[PER_STEP]] : index
// CHECK: %[[FETCHING:.+]] = arith.constant 16 : index
// CHECK: %[[FETCHES:.+]] = arith.cmpi ult, %[[TILE]], %[[FETCHING]] : index
// CHECK: scf.if %[[FETCHES]] {
// CHECK-NEXT: memref.prefetch %{{.+}}[%{{.+}}], read, locality<2>, data : memref<16384xf32>
func.func @many_rows(%a: memref<256x64xf32>, %b: memref<8x64x32xf32>, %c: memref<256x8x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %pad = ub.poison : f32
  %zero = arith.constant dense<0.0> : vector<32xf32>
  scf.for %j = %c0 to %c8 step %c2 {
    scf.for %r = %c0 to %c256 step %c8 {
      scf.for %p = %c0 to %c2 step %c1 {
        %panel = arith.addi %j, %p : index
        %acc = scf.for %k = %c0 to %c64 step %c1 iter_args(%s = %zero) -> (vector<32xf32>) {
          %x = memref.load %a[%r, %k] : memref<256x64xf32>
          %row = vector.transfer_read %b[%panel, %k, %c0], %pad {in_bounds = [true]} : memref<8x64x32xf32>, vector<32xf32>
          %t = vector.outerproduct %row, %x, %s {kind = #vector.kind<add>} : vector<32xf32>, f32
          scf.yield %t : vector<32xf32>
        }
        vector.transfer_write %acc, %c[%r, %panel, %c0] {in_bounds = [true]} : vector<32xf32>, memref<256x8x32xf32>
      }
    }
  } {relax.prefetch_next_block}
  return
}

// -----

// Shapes the pass does not know keep no prefetch, and lose the annotation: B made inside the
// block loop, and a row loop whose step is not a constant.
// CHECK-LABEL: func.func @not_matched
// CHECK-NOT: memref.prefetch
// CHECK-NOT: memref.collapse_shape
// CHECK-NOT: relax.prefetch_next_block
// CHECK: return
func.func @not_matched(%a: memref<32x64xf32>, %c: memref<32x8x32xf32>, %step: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %pad = ub.poison : f32
  %zero = arith.constant dense<0.0> : vector<32xf32>
  scf.for %j = %c0 to %c8 step %c2 {
    %b = memref.alloc() : memref<8x64x32xf32>
    scf.for %r = %c0 to %c32 step %c8 {
      scf.for %p = %c0 to %c2 step %c1 {
        %panel = arith.addi %j, %p : index
        %acc = scf.for %k = %c0 to %c64 step %c1 iter_args(%s = %zero) -> (vector<32xf32>) {
          %x = memref.load %a[%r, %k] : memref<32x64xf32>
          %row = vector.transfer_read %b[%panel, %k, %c0], %pad {in_bounds = [true]} : memref<8x64x32xf32>, vector<32xf32>
          %t = vector.outerproduct %row, %x, %s {kind = #vector.kind<add>} : vector<32xf32>, f32
          scf.yield %t : vector<32xf32>
        }
        vector.transfer_write %acc, %c[%r, %panel, %c0] {in_bounds = [true]} : vector<32xf32>, memref<32x8x32xf32>
      }
    }
    memref.dealloc %b : memref<8x64x32xf32>
  } {relax.prefetch_next_block}
  %b2 = memref.alloc() : memref<8x64x32xf32>
  scf.for %j = %c0 to %c8 step %c2 {
    scf.for %r = %c0 to %c32 step %step {
      scf.for %p = %c0 to %c2 step %c1 {
        %panel = arith.addi %j, %p : index
        %acc = scf.for %k = %c0 to %c64 step %c1 iter_args(%s = %zero) -> (vector<32xf32>) {
          %x = memref.load %a[%r, %k] : memref<32x64xf32>
          %row = vector.transfer_read %b2[%panel, %k, %c0], %pad {in_bounds = [true]} : memref<8x64x32xf32>, vector<32xf32>
          %t = vector.outerproduct %row, %x, %s {kind = #vector.kind<add>} : vector<32xf32>, f32
          scf.yield %t : vector<32xf32>
        }
        vector.transfer_write %acc, %c[%r, %panel, %c0] {in_bounds = [true]} : vector<32xf32>, memref<32x8x32xf32>
      }
    }
  } {relax.prefetch_next_block}
  memref.dealloc %b2 : memref<8x64x32xf32>
  return
}

// -----

// Symbolic rows (a model built for any sequence length): the row tiles are counted before the
// row loop runs (not in the K loop), ceil(rows / 8), at most 16 of them fetch (at least 1: no
// division by 0 where no tile runs), NR / that many floats a step.
// CHECK-LABEL: func.func @symbolic_rows
// CHECK-SAME: %[[ROWS:[a-z0-9_]+]]: index)
// CHECK: scf.for %{{.+}} = %c0 to %c8 step %c2 {
// CHECK: %[[SPAN:.+]] = arith.addi %[[ROWS]], %{{.+}} : index
// CHECK: %[[TILES:.+]] = arith.divui %[[SPAN]], %{{.+}} : index
// CHECK: %[[MOST:.+]] = arith.constant 16 : index
// CHECK: %[[AT_MOST:.+]] = arith.minui %[[TILES]], %[[MOST]] : index
// CHECK: %[[FETCHING:.+]] = arith.maxui %[[AT_MOST]], %{{.+}} : index
// CHECK: %[[PER_STEP:.+]] = arith.divui %{{.+}}, %[[FETCHING]] : index
// CHECK: scf.for %[[R:.+]] = %c0 to %[[ROWS]] step %c8 {
// CHECK: scf.for %[[K:.+]] = %c0 to %c64 step %c1
// CHECK: vector.transfer_read
// CHECK-NOT: arith.divui %{{.+}}, %[[FETCHING]]
// CHECK: %[[TILE:.+]] = arith.divui %[[R]], %{{.+}} : index
// CHECK: arith.muli %[[K]], %[[PER_STEP]] : index
// CHECK: %[[FETCHES:.+]] = arith.cmpi ult, %[[TILE]], %[[FETCHING]] : index
// CHECK: scf.if %[[FETCHES]] {
// CHECK-NEXT: memref.prefetch
func.func @symbolic_rows(%a: memref<?x64xf32>, %b: memref<8x64x32xf32>, %c: memref<?x8x32xf32>, %rows: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = ub.poison : f32
  %zero = arith.constant dense<0.0> : vector<32xf32>
  scf.for %j = %c0 to %c8 step %c2 {
    scf.for %r = %c0 to %rows step %c8 {
      scf.for %p = %c0 to %c2 step %c1 {
        %panel = arith.addi %j, %p : index
        %acc = scf.for %k = %c0 to %c64 step %c1 iter_args(%s = %zero) -> (vector<32xf32>) {
          %x = memref.load %a[%r, %k] : memref<?x64xf32>
          %row = vector.transfer_read %b[%panel, %k, %c0], %pad {in_bounds = [true]} : memref<8x64x32xf32>, vector<32xf32>
          %t = vector.outerproduct %row, %x, %s {kind = #vector.kind<add>} : vector<32xf32>, f32
          scf.yield %t : vector<32xf32>
        }
        vector.transfer_write %acc, %c[%r, %panel, %c0] {in_bounds = [true]} : vector<32xf32>, memref<?x8x32xf32>
      }
    }
  } {relax.prefetch_next_block}
  return
}

// -----

// Blocks of one panel (a deep K: BERT's 3072 -> 768 projection): canonicalization dropped the
// panel loop of one iteration; the row tiles' K loop reads the block loop's panel.
// CHECK-LABEL: func.func @one_panel_blocks
// CHECK: %[[FLAT:.+]] = memref.collapse_shape
// CHECK: scf.for %[[J:.+]] = %c0 to %c8 step %c1 {
// CHECK: scf.for %[[K:.+]] = %c0 to %c64 step %c1
// CHECK: vector.transfer_read %{{.+}}[%[[J]], %[[K]], %c0]
// CHECK: %[[NEXT:.+]] = arith.addi %[[J]], %{{.+}} : index
// CHECK: memref.prefetch %[[FLAT]]
func.func @one_panel_blocks(%a: memref<32x64xf32>, %b: memref<8x64x32xf32>, %c: memref<32x8x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %pad = ub.poison : f32
  %zero = arith.constant dense<0.0> : vector<32xf32>
  scf.for %j = %c0 to %c8 step %c1 {
    scf.for %r = %c0 to %c32 step %c8 {
      %acc = scf.for %k = %c0 to %c64 step %c1 iter_args(%s = %zero) -> (vector<32xf32>) {
        %x = memref.load %a[%r, %k] : memref<32x64xf32>
        %row = vector.transfer_read %b[%j, %k, %c0], %pad {in_bounds = [true]} : memref<8x64x32xf32>, vector<32xf32>
        %t = vector.outerproduct %row, %x, %s {kind = #vector.kind<add>} : vector<32xf32>, f32
        scf.yield %t : vector<32xf32>
      }
      vector.transfer_write %acc, %c[%r, %j, %c0] {in_bounds = [true]} : vector<32xf32>, memref<32x8x32xf32>
    }
  } {relax.prefetch_next_block}
  return
}
