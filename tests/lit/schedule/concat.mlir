// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' -split-input-file | FileCheck %s

// TE's concat of three inputs along axis 1 branches on the output index (`d1 < 3`, then
// `d1 < 8`); each branch becomes its own generic over its slice of the output, with the read
// raised to a view: the copies fold into insert_slices, the scaled input is an elementwise op,
// and no branch nor scalar gather is left. Every part writes its box of the whole output (one
// level of slices, however many inputs: nested slices made bufferization quadratic in them),
// computed into a tensor.empty of its own, which empty-tensor elimination then replaces by its
// box (a slice of the output as the init was bufferized as a temporary and a copy).
// CHECK-LABEL: func.func private @concat3
// CHECK-SAME: relax.schedule = ["elementwise-8"]
// CHECK-NOT: scf.if
// CHECK-NOT: tensor.extract %
// CHECK: tensor.insert_slice %arg0 into %arg3[0, 0, 0] [2, 3, 8]
// CHECK: tensor.insert_slice %arg1 into %{{.+}}[0, 3, 0] [2, 5, 8] [1, 1, 1] : tensor<2x5x8xf32> into tensor<2x12x8xf32>
// CHECK: tensor.empty() : tensor<2x4x8xf32>
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

// -----

// A concat along a symbolic axis (a KV cache and the new step's keys) tests the index against
// an SSA size (`d1 < dim(cache, 1)`), which no grid can evaluate: the test is read as a linear
// form and the output splits at the size, the first part clamped to the output's extent. The
// second part's read, `new[(d1 + n) - n]`, cancels to a plain index, so both parts are copies
// of views (the new step's one row sliced to the part's symbolic extent): two insert_slices.
// CHECK-LABEL: func.func private @kv_concat
// CHECK-SAME: relax.schedule = []
// CHECK-NOT: scf.if
// CHECK-NOT: tensor.extract %
// CHECK: %[[N:.+]] = tensor.dim %arg0, %c1
// CHECK: %[[OUT:.+]] = tensor.dim %arg2, %c1
// CHECK: %[[HEAD:.+]] = arith.minsi %[[N]], %[[OUT]]
// CHECK: %[[TAIL:.+]] = arith.subi %[[OUT]], %[[HEAD]]
// CHECK: %[[CACHE:.+]] = tensor.extract_slice %arg0[0, 0, 0] [4, %[[HEAD]], 8]
// CHECK: %[[FIRST:.+]] = tensor.insert_slice %[[CACHE]] into %arg2[0, 0, 0] [4, %[[HEAD]], 8]
// CHECK: %[[NEW:.+]] = tensor.extract_slice %arg1[0, 0, 0] [4, %[[TAIL]], 8] [1, 1, 1] : tensor<4x1x8xf32> to tensor<4x?x8xf32>
// CHECK: tensor.insert_slice %[[NEW]] into %[[FIRST]][0, %[[HEAD]], 0] [4, %[[TAIL]], 8]
func.func private @kv_concat(%cache: tensor<4x?x8xf32>, %new: tensor<4x1x8xf32>, %o: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> attributes {relax.prim_func} {
  %c1 = arith.constant 1 : index
  %n = tensor.dim %cache, %c1 : tensor<4x?x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} outs(%o : tensor<4x?x8xf32>) {
  ^bb0(%out: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %i2 = linalg.index 2 : index
    %j = arith.index_cast %i1 : index to i64
    %m = arith.index_cast %n : index to i64
    %first = arith.cmpi slt, %j, %m : i64
    %v = scf.if %first -> (f32) {
      %x = tensor.extract %cache[%i0, %i1, %i2] : tensor<4x?x8xf32>
      scf.yield %x : f32
    } else {
      %k = arith.subi %i1, %n : index
      %y = tensor.extract %new[%i0, %k, %i2] : tensor<4x1x8xf32>
      scf.yield %y : f32
    }
    linalg.yield %v : f32
  } -> tensor<4x?x8xf32>
  return %r : tensor<4x?x8xf32>
}

// -----

// Three inputs, two of them symbolic: the second test (`d1 < na + nb`) in the part shifted by
// `na` splits at `nb` (the forms cancel `na`), and the last read `c[d1 - (na + nb)]` becomes a
// plain index in the part shifted by both (and scaled there: an elementwise op on its view).
// CHECK-LABEL: func.func private @concat_symbolic3
// CHECK-SAME: relax.schedule = ["elementwise-8"]
// CHECK-NOT: scf.if
// CHECK-NOT: tensor.extract %
// CHECK: %[[NA:.+]] = tensor.dim %arg0, %c1
// CHECK: %[[NB:.+]] = tensor.dim %arg1, %c1
// CHECK: arith.minsi %[[NA]]
// CHECK: tensor.insert_slice %{{.+}} into %arg3[0, 0, 0]
// CHECK: arith.minsi %[[NB]]
// CHECK: tensor.insert_slice
// CHECK: arith.mulf {{.*}} : vector<8xf32>
// CHECK: tensor.insert_slice
// CHECK: return
func.func private @concat_symbolic3(%a: tensor<4x?x8xf32>, %b: tensor<4x?x8xf32>, %c: tensor<4x2x8xf32>, %o: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> attributes {relax.prim_func} {
  %c1 = arith.constant 1 : index
  %na = tensor.dim %a, %c1 : tensor<4x?x8xf32>
  %nb = tensor.dim %b, %c1 : tensor<4x?x8xf32>
  %two = arith.constant 2.0 : f32
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} outs(%o : tensor<4x?x8xf32>) {
  ^bb0(%out: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %i2 = linalg.index 2 : index
    %lt_a = arith.cmpi slt, %i1, %na : index
    %v = scf.if %lt_a -> (f32) {
      %x = tensor.extract %a[%i0, %i1, %i2] : tensor<4x?x8xf32>
      scf.yield %x : f32
    } else {
      %nab = arith.addi %na, %nb : index
      %lt_b = arith.cmpi slt, %i1, %nab : index
      %w = scf.if %lt_b -> (f32) {
        %k = arith.subi %i1, %na : index
        %y = tensor.extract %b[%i0, %k, %i2] : tensor<4x?x8xf32>
        scf.yield %y : f32
      } else {
        %k = arith.subi %i1, %nab : index
        %z = tensor.extract %c[%i0, %k, %i2] : tensor<4x2x8xf32>
        %zz = arith.mulf %z, %two : f32
        scf.yield %zz : f32
      }
      scf.yield %w : f32
    }
    linalg.yield %v : f32
  } -> tensor<4x?x8xf32>
  return %r : tensor<4x?x8xf32>
}

// -----

// A test against a size that is not provably non-negative (a difference of two sizes) keeps
// its generic: the split would be unsound where the difference is negative.
// CHECK-LABEL: func.func private @concat_unsigned_size
// CHECK: scf.if
func.func private @concat_unsigned_size(%a: tensor<4x?x8xf32>, %b: tensor<4x?x8xf32>, %o: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> attributes {relax.prim_func} {
  %c1 = arith.constant 1 : index
  %na = tensor.dim %a, %c1 : tensor<4x?x8xf32>
  %nb = tensor.dim %b, %c1 : tensor<4x?x8xf32>
  %d = arith.subi %na, %nb : index
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} outs(%o : tensor<4x?x8xf32>) {
  ^bb0(%out: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %i2 = linalg.index 2 : index
    %lt = arith.cmpi slt, %i1, %d : index
    %v = scf.if %lt -> (f32) {
      %x = tensor.extract %a[%i0, %i1, %i2] : tensor<4x?x8xf32>
      scf.yield %x : f32
    } else {
      %x = tensor.extract %b[%i0, %i1, %i2] : tensor<4x?x8xf32>
      scf.yield %x : f32
    }
    linalg.yield %v : f32
  } -> tensor<4x?x8xf32>
  return %r : tensor<4x?x8xf32>
}
