// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' -split-input-file | FileCheck %s

// TE's concat of three inputs along axis 1 branches on the output index (`d1 < 3`, then
// `d1 < 8`); each branch becomes its own generic over its slice of the output, with the read
// raised to a view: the copies fold into insert_slices, the scaled input is an elementwise op,
// and no branch nor scalar gather is left. Every part writes its box of the whole output (one
// level of slices, however many inputs: nested slices made bufferization quadratic in them).
// CHECK-LABEL: func.func private @concat3
// CHECK-SAME: relax.schedule = ["elementwise-8"]
// CHECK-NOT: scf.if
// CHECK-NOT: tensor.extract %
// CHECK: tensor.insert_slice %arg0 into %arg3[0, 0, 0] [2, 3, 8]
// CHECK: tensor.insert_slice %arg1 into %{{.+}}[0, 3, 0] [2, 5, 8] [1, 1, 1] : tensor<2x5x8xf32> into tensor<2x12x8xf32>
// CHECK: tensor.extract_slice %{{.+}}[0, 8, 0] [2, 4, 8] [1, 1, 1] : tensor<2x12x8xf32> to tensor<2x4x8xf32>
// CHECK: vector.transfer_read %arg2
// CHECK: arith.mulf {{.*}} : vector<8xf32>
// CHECK: tensor.insert_slice {{.*}}[0, 8, 0] [2, 4, 8] [1, 1, 1] : tensor<2x4x8xf32> into tensor<2x12x8xf32>
// CHECK-NOT: tensor<2x9x8xf32>
// CHECK: return
func.func private @concat3(%a: tensor<2x3x8xf32>, %b: tensor<2x5x8xf32>, %c: tensor<2x4x8xf32>, %o: tensor<2x12x8xf32>) -> tensor<2x12x8xf32> attributes {relax.prim_func} {
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %c3_i32 = arith.constant 3 : i32
  %c8_i32 = arith.constant 8 : i32
  %two = arith.constant 2.0 : f32
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} outs(%o : tensor<2x12x8xf32>) {
  ^bb0(%out: f32):
    %i2 = linalg.index 2 : index
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %j = arith.index_cast %i1 : index to i32
    %first = arith.cmpi slt, %j, %c3_i32 : i32
    %v = scf.if %first -> (f32) {
      %x = tensor.extract %a[%i0, %i1, %i2] : tensor<2x3x8xf32>
      scf.yield %x : f32
    } else {
      %second = arith.cmpi slt, %j, %c8_i32 : i32
      %w = scf.if %second -> (f32) {
        %k = arith.subi %i1, %c3 : index
        %y = tensor.extract %b[%i0, %k, %i2] : tensor<2x5x8xf32>
        scf.yield %y : f32
      } else {
        %k = arith.subi %i1, %c8 : index
        %z = tensor.extract %c[%i0, %k, %i2] : tensor<2x4x8xf32>
        %zz = arith.mulf %z, %two : f32
        scf.yield %zz : f32
      }
      scf.yield %w : f32
    }
    linalg.yield %v : f32
  } -> tensor<2x12x8xf32>
  return %r : tensor<2x12x8xf32>
}

// -----

// A branch whose test is not one box per branch (a checkerboard) keeps its generic.
// CHECK-LABEL: func.func private @checkerboard
// CHECK-SAME: relax.schedule = ["fallback"]
// CHECK: scf.if
func.func private @checkerboard(%a: tensor<4x4xf32>, %o: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%o : tensor<4x4xf32>) {
  ^bb0(%out: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %s = arith.addi %i0, %i1 : index
    %m = arith.remsi %s, %c2 : index
    %even = arith.cmpi eq, %m, %c0 : index
    %v = scf.if %even -> (f32) {
      %x = tensor.extract %a[%i0, %i1] : tensor<4x4xf32>
      scf.yield %x : f32
    } else {
      scf.yield %zero : f32
    }
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
