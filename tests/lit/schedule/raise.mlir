// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' -split-input-file | FileCheck %s

// TE broadcasts a size-1 batch axis with a constant-0 index; dropping unit dims first makes
// the [1, 16, 32] x [32, 64] linear a 2-D matmul for the rows route (it was naive loops): 8-row
// tiles read A's columns in place.
// CHECK-LABEL: func.func private @broadcast_batch_matmul
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+1x64"]
// CHECK: vector.transfer_read %arg0{{.*}} : tensor<1x16x32xf32>, vector<8x1xf32>
// CHECK: vector.outerproduct {{.*}} : vector<32xf32>, f32
// CHECK-NOT: linalg.generic
func.func private @broadcast_batch_matmul(%a: tensor<1x16x32xf32>, %b: tensor<32x64xf32>, %c: tensor<1x16x64xf32>) -> tensor<1x16x64xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<1x16x32xf32>, tensor<32x64xf32>) outs(%f : tensor<1x16x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x16x64xf32>
  return %r : tensor<1x16x64xf32>
}

// -----

// TE's pad (bounds test + scf.if + tensor.extract) becomes fill + a copy into the interior, and
// the convolution reading it is a direct convolution again (in the kernel of one sample, run
// in a loop over the batch of 2).
// CHECK-LABEL: func.func private @pad_then_conv
// CHECK-SAME: relax.schedule = ["per-sample", "elementwise-12", "conv-4x6x12"]
// CHECK-NOT: scf.if
// CHECK: %[[FILL:.+]] = linalg.fill
// CHECK: %[[INTERIOR:.+]] = tensor.extract_slice %[[FILL]][0, 0, 2, 2] [1, 1, 12, 12]
// CHECK: %[[COPY:.+]] = scf.for {{.*}} iter_args(%{{.+}} = %[[INTERIOR]])
// CHECK: tensor.insert_slice %[[COPY]] into %[[FILL]][0, 0, 2, 2] [1, 1, 12, 12]
// CHECK-NOT: linalg.generic
func.func private @pad_then_conv(%x: tensor<2x1x12x12xf32>, %w: tensor<4x1x5x5xf32>, %o: tensor<2x4x12x12xf32>) -> tensor<2x4x12x12xf32> attributes {relax.prim_func} {
  %e = tensor.empty() : tensor<2x1x16x16xf32>
  %pad = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%e : tensor<2x1x16x16xf32>) {
  ^bb0(%out: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %i2 = linalg.index 2 : index
    %i3 = linalg.index 3 : index
    %c2 = arith.constant 2 : index
    %c14 = arith.constant 14 : index
    %a = arith.cmpi sge, %i2, %c2 : index
    %b = arith.cmpi slt, %i2, %c14 : index
    %c = arith.cmpi sge, %i3, %c2 : index
    %d = arith.cmpi slt, %i3, %c14 : index
    %ab = arith.andi %a, %b : i1
    %abc = arith.andi %ab, %c : i1
    %in = arith.andi %abc, %d : i1
    %v = scf.if %in -> (f32) {
      %y = arith.subi %i2, %c2 : index
      %z = arith.subi %i3, %c2 : index
      %t = tensor.extract %x[%i0, %i1, %y, %z] : tensor<2x1x12x12xf32>
      scf.yield %t : f32
    } else {
      %zero = arith.constant 0.0 : f32
      scf.yield %zero : f32
    }
    linalg.yield %v : f32
  } -> tensor<2x1x16x16xf32>
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%o : tensor<2x4x12x12xf32>) -> tensor<2x4x12x12xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 + d5, d3 + d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%pad, %w : tensor<2x1x16x16xf32>, tensor<4x1x5x5xf32>) outs(%f : tensor<2x4x12x12xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x12x12xf32>
  return %r : tensor<2x4x12x12xf32>
}

// -----

// TE's reshape [4, 32] -> [8, 16] -> transposed, as a gather with floordiv/remsi: the address is
// affine in the loop indices, so it reads an expand_shape view with a permutation map.
// CHECK-LABEL: func.func private @reshape_transpose
// CHECK-SAME: relax.schedule = ["transpose-16x8"]
// CHECK-NOT: floordivsi
// CHECK-NOT: tensor.extract %
// CHECK: %[[FLAT:.+]] = tensor.collapse_shape %{{.+}} {{\[\[}}0, 1]] : tensor<4x32xf32> into tensor<128xf32>
// CHECK: %[[VIEW:.+]] = tensor.expand_shape %[[FLAT]] {{\[\[}}0, 1]] output_shape [8, 16]
// CHECK: vector.transfer_read %[[VIEW]]
func.func private @reshape_transpose(%x: tensor<4x32xf32>, %out: tensor<16x8xf32>) -> tensor<16x8xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%out : tensor<16x8xf32>) {
  ^bb0(%o: f32):
    %j = linalg.index 0 : index
    %i = linalg.index 1 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %f = arith.muli %i, %c16 : index
    %flat = arith.addi %f, %j : index
    %row = arith.floordivsi %flat, %c32 : index
    %col = arith.remsi %flat, %c32 : index
    %v = tensor.extract %x[%row, %col] : tensor<4x32xf32>
    linalg.yield %v : f32
  } -> tensor<16x8xf32>
  return %r : tensor<16x8xf32>
}

// -----

// GPT-2's head split of its fused QKV output: columns 16..31 of [1, 2, 48] as [2, 4, 4] heads,
// transposed. The view merges the unit axis and expands only the column axis ([1, 2, 48] ->
// [2, 48] -> [2, 12, 4]). A collapse of all three axes to [96] (which canonicalization cannot
// fold into the expand: equal ranks) is not contiguous once the source is itself a slice of a
// wider buffer, and bufferization copied it (serially, at every call).
// CHECK-LABEL: func.func private @head_split_of_a_slice
// CHECK: %[[ROWS:.+]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2]] : tensor<1x2x48xf32> into tensor<2x48xf32>
// CHECK: %[[VIEW:.+]] = tensor.expand_shape %[[ROWS]] {{\[\[}}0], [1, 2]] output_shape [2, 12, 4] : tensor<2x48xf32> into tensor<2x12x4xf32>
// CHECK: tensor.extract_slice %[[VIEW]][0, 4, 0] [2, 4, 4] [1, 1, 1]
func.func private @head_split_of_a_slice(%x: tensor<1x2x48xf32>, %out: tensor<4x2x4xf32>) -> tensor<4x2x4xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} outs(%out : tensor<4x2x4xf32>) {
  ^bb0(%o: f32):
    %h = linalg.index 0 : index
    %s = linalg.index 1 : index
    %d = linalg.index 2 : index
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %hd = arith.muli %h, %c4 : index
    %in = arith.addi %hd, %d : index
    %col = arith.addi %in, %c16 : index
    %v = tensor.extract %x[%c0, %s, %col] : tensor<1x2x48xf32>
    linalg.yield %v : f32
  } -> tensor<4x2x4xf32>
  return %r : tensor<4x2x4xf32>
}

// -----

// Max pooling 2x2 stride 2 (TE: strided map + window-shape operands): a reduction over the
// [.., Y, 2, X, 2] view that reads each output row's windows contiguously and deinterleaves.
// CHECK-LABEL: func.func private @max_pool
// CHECK-SAME: relax.schedule = ["reduction-window-8x2"]
// CHECK: %[[VIEW:.+]] = tensor.expand_shape %{{.+}} {{\[\[}}0], [1], [2, 3], [4, 5]] output_shape [2, 3, 4, 2, 8, 2]
// CHECK: vector.transfer_read %[[VIEW]]{{.*}} : tensor<2x3x4x2x8x2xf32>, vector<8x2xf32>
// CHECK: vector.shuffle {{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15]
// CHECK: arith.maximumf {{.*}} : vector<8xf32>
func.func private @max_pool(%x: tensor<2x3x8x16xf32>, %out: tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32> attributes {relax.prim_func} {
  %k0 = tensor.empty() : tensor<2xi8>
  %k1 = tensor.empty() : tensor<2xi8>
  %ninf = arith.constant 0xFF800000 : f32
  %f = linalg.fill ins(%ninf : f32) outs(%out : tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d4)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%x, %k0, %k1 : tensor<2x3x8x16xf32>, tensor<2xi8>, tensor<2xi8>) outs(%f : tensor<2x3x4x8xf32>) {
  ^bb0(%v: f32, %a: i8, %b: i8, %acc: f32):
    %m = arith.maximumf %acc, %v : f32
    linalg.yield %m : f32
  } -> tensor<2x3x4x8xf32>
  return %r : tensor<2x3x4x8xf32>
}

// -----

// math.exp on vectors: a polynomial (no libm call per lane).
// CHECK-LABEL: func.func private @exp
// CHECK-SAME: relax.schedule = ["elementwise-64"]
// CHECK-NOT: math.exp
// CHECK: math.roundeven %{{.+}} : vector<64xf32>
// CHECK: math.fma
// CHECK: arith.shli
// CHECK: arith.bitcast
// CHECK-NOT: math.exp
func.func private @exp(%x: tensor<64xf32>, %out: tensor<64xf32>) -> tensor<64xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<64xf32>) outs(%out : tensor<64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

// TE's reshape of [1, n, 768] into heads [1, n, 12, 64] over a symbolic sequence: the flat
// index is (h * 64 + d) mod 768 along the static axis while `n` passes through. The symbolic
// axis stays, the static one is expanded: a view, then one copy into the out-argument, no
// gather left (it was a scalar loop of 66 us per call at n = 256, 36 calls in BERT-base).
// CHECK-LABEL: func.func private @heads_over_a_symbolic_sequence
// CHECK-SAME: relax.schedule = []
// CHECK-NOT: tensor.extract %
// CHECK: tensor.expand_shape %arg0 {{\[}}[0], [1], [2, 3]] output_shape [1, %{{.+}}, 12, 64] : tensor<1x?x768xf32> into tensor<1x?x12x64xf32>
// CHECK: tensor.insert_slice
// CHECK-NOT: linalg.generic
func.func private @heads_over_a_symbolic_sequence(%x: tensor<1x?x768xf32>, %o: tensor<1x?x12x64xf32>) -> tensor<1x?x12x64xf32> attributes {relax.prim_func} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c768 = arith.constant 768 : index
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%o : tensor<1x?x12x64xf32>) {
  ^bb0(%out: f32):
    %i3 = linalg.index 3 : index
    %i2 = linalg.index 2 : index
    %i1 = linalg.index 1 : index
    %i0 = linalg.index 0 : index
    %a = arith.muli %i2, %c64 : index
    %f = arith.addi %a, %i3 : index
    %q = arith.floordivsi %f, %c768 : index
    %m = arith.muli %q, %c768 : index
    %k = arith.subi %f, %m : index
    %v = tensor.extract %x[%i0, %i1, %k] : tensor<1x?x768xf32>
    linalg.yield %v : f32
  } -> tensor<1x?x12x64xf32>
  return %r : tensor<1x?x12x64xf32>
}

// -----

// The symbolic loop also feeds a static axis (a diagonal-like read): not a pass-through, so
// the gather stays.
// CHECK-LABEL: func.func private @symbolic_loop_in_a_static_index
// CHECK: tensor.extract %arg0
func.func private @symbolic_loop_in_a_static_index(%x: tensor<?x8xf32>, %o: tensor<?x8xf32>) -> tensor<?x8xf32> attributes {relax.prim_func} {
  %c8 = arith.constant 8 : index
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%o : tensor<?x8xf32>) {
  ^bb0(%out: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %s = arith.addi %i0, %i1 : index
    %k = arith.remsi %s, %c8 : index
    %v = tensor.extract %x[%i0, %k] : tensor<?x8xf32>
    linalg.yield %v : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
