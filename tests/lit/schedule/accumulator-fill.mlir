// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' -split-input-file | FileCheck %s

// A [1, 64, 512] x [512, 1024] linear on two threads (the rows route, C in [M, N/32, 32]
// panels; B, 2 MB, is more than the target's 1 MB L2, so the threads take 16 of B's 32 panels
// each). Nothing zeroes its accumulator: every C tile is computed once over the whole K, so
// its register tile starts from zero vectors instead of loading a zero-filled tile (a memset of
// all of C at every call before). Once the unit batch axis is dropped, the out-argument itself
// is not zeroed either (the unpacked result overwrites all of it).
// CHECK-LABEL: func.func private @linear
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+1x128"]
// CHECK-NOT: linalg.fill
// CHECK: %[[EMPTY:[a-z0-9_]+]] = tensor.empty() : tensor<64x32x32xf32>
// CHECK-NEXT: scf.forall {{.*}} shared_outs(%{{[a-z0-9_]+}} = %[[EMPTY]]) -> (tensor<64x32x32xf32>)
// CHECK: %[[Z:[a-z0-9_]+]] = arith.constant dense<0.000000e+00> : vector<8x1x32xf32>
// CHECK-NEXT: %[[Z8:[a-z0-9_]+]] = vector.shape_cast %[[Z]] : vector<8x1x32xf32> to vector<8x32xf32>
// CHECK-NEXT: scf.for {{.*}} iter_args(%{{.+}} = %[[Z8]]) -> (vector<8x32xf32>)
// CHECK: scf.forall.in_parallel
// CHECK-NOT: linalg.fill
// CHECK: tensor.insert_slice {{.*}} into %arg2[0, 0, 0] [1, 64, 1024]
func.func private @linear(%a: tensor<1x64x512xf32>, %b: tensor<512x1024xf32>, %c: tensor<1x64x1024xf32>) -> tensor<1x64x1024xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<1x64x1024xf32>) -> tensor<1x64x1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<1x64x512xf32>, tensor<512x1024xf32>) outs(%f : tensor<1x64x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x64x1024xf32>
  return %r : tensor<1x64x1024xf32>
}

// -----

// The same with a [96, 256] B (96 KB, in L2): the threads split the rows, as the row-wise ops
// around a linear do; the tiles start from zero vectors.
// CHECK-LABEL: func.func private @small_linear
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+1x128"]
// CHECK-NOT: linalg.fill
// CHECK: %[[EMPTY:[a-z0-9_]+]] = tensor.empty() : tensor<64x8x32xf32>
// CHECK-NEXT: scf.forall {{.*}} shared_outs(%{{[a-z0-9_]+}} = %[[EMPTY]]) -> (tensor<64x8x32xf32>)
// CHECK: %[[Z:[a-z0-9_]+]] = arith.constant dense<0.000000e+00> : vector<8x1x32xf32>
// CHECK-NEXT: %[[Z8:[a-z0-9_]+]] = vector.shape_cast %[[Z]] : vector<8x1x32xf32> to vector<8x32xf32>
// CHECK-NEXT: scf.for {{.*}} iter_args(%{{.+}} = %[[Z8]]) -> (vector<8x32xf32>)
// CHECK: scf.forall.in_parallel
// CHECK-NOT: linalg.fill
// CHECK: tensor.insert_slice {{.*}} into %arg2[0, 0, 0] [1, 64, 256]
func.func private @small_linear(%a: tensor<1x64x96xf32>, %b: tensor<96x256xf32>, %c: tensor<1x64x256xf32>) -> tensor<1x64x256xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<1x64x256xf32>) -> tensor<1x64x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<1x64x96xf32>, tensor<96x256xf32>) outs(%f : tensor<1x64x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x64x256xf32>
  return %r : tensor<1x64x256xf32>
}

// -----

// A [1, n, 512] x [512, 256] linear over a symbolic sequence `n`, no epilogue. The row count of
// the run-time dispatch is read through the slice that drops the unit batch axis (n >= 4: the
// parallel copy). The accumulator is a tensor of its own, never zeroed (the tiles start from
// zero vectors; a slice of the out-argument's fill had left a serial fill of the whole output
// and a copy of the packed C at every call); C's copy splits as the product did; the
// out-argument is not zeroed in either copy.
// CHECK-LABEL: func.func private @symbolic_linear
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+4x64+2x128+1x128", "matmul-rows-8x32+4x64+2x128+1x128"]
// CHECK-NOT: linalg.fill
// CHECK: %[[N:[a-z0-9_]+]] = tensor.dim %arg0, %c1 : tensor<1x?x512xf32>
// CHECK: %[[MANY:[a-z0-9_]+]] = arith.cmpi sge, %[[N]], %c4 : index
// CHECK: scf.if %[[MANY]]
// CHECK-NOT: linalg.fill
// CHECK: %[[EMPTY:[a-z0-9_]+]] = tensor.empty(%{{[a-z0-9_]+}}) : tensor<?x8x32xf32>
// CHECK-NOT: linalg.fill
// CHECK: scf.forall (%{{.+}}) in (2) shared_outs(%{{[a-z0-9_]+}} = %[[EMPTY]]) -> (tensor<?x8x32xf32>)
// CHECK: %[[Z:[a-z0-9_]+]] = arith.constant dense<0.000000e+00> : vector<8x1x32xf32>
// CHECK-NEXT: %[[Z8:[a-z0-9_]+]] = vector.shape_cast %[[Z]] : vector<8x1x32xf32> to vector<8x32xf32>
// CHECK-NEXT: scf.for {{.*}} iter_args(%{{.+}} = %[[Z8]]) -> (vector<8x32xf32>)
// CHECK: scf.forall.in_parallel
// CHECK-NOT: linalg.fill
// CHECK: scf.forall (%{{.+}}) in (2) shared_outs(%{{.+}}) -> (tensor<?x256xf32>)
// CHECK: tensor.insert_slice {{.*}} into %arg2[0, 0, 0] [1, %{{.+}}, 256]
// CHECK: } else {
// CHECK-NOT: scf.forall
// CHECK: %[[Z:[a-z0-9_]+]] = arith.constant dense<0.000000e+00> : vector<8x1x32xf32>
// CHECK-NEXT: %[[Z8:[a-z0-9_]+]] = vector.shape_cast %[[Z]] : vector<8x1x32xf32> to vector<8x32xf32>
// CHECK-NEXT: scf.for {{.*}} iter_args(%{{.+}} = %[[Z8]]) -> (vector<8x32xf32>)
// CHECK-NOT: linalg.fill
// CHECK-NOT: scf.forall
// CHECK: tensor.insert_slice {{.*}} into %arg2[0, 0, 0] [1, %{{.+}}, 256]
func.func private @symbolic_linear(%a: tensor<1x?x512xf32>, %b: tensor<512x256xf32>, %c: tensor<1x?x256xf32>) -> tensor<1x?x256xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<1x?x256xf32>) -> tensor<1x?x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<1x?x512xf32>, tensor<512x256xf32>) outs(%f : tensor<1x?x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x?x256xf32>
  return %r : tensor<1x?x256xf32>
}

// -----

// The same with a [512, 1024] B (2 MB, beyond the 1 MB L2): in both copies the threads take
// half of B's panels each, over every row (the serial copy's few rows, the parallel copy's
// many: each thread streams half of B), and the parallel copy's C is copied by rows.
// CHECK-LABEL: func.func private @symbolic_wide_linear
// CHECK-NOT: linalg.fill
// CHECK: scf.if
// CHECK: scf.forall (%{{.+}}) in (2) shared_outs(%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}) -> (tensor<?x32x32xf32>)
// CHECK-NOT: } else {
// CHECK: tensor.extract_slice %{{.+}} : tensor<?x32x32xf32> to tensor<?x16x32xf32>
// CHECK-NOT: } else {
// CHECK: scf.forall.in_parallel
// CHECK-NOT: } else {
// CHECK: scf.forall (%{{.+}}) in (2) shared_outs(%{{.+}}) -> (tensor<?x1024xf32>)
// CHECK: } else {
// CHECK: scf.forall (%{{.+}}) in (2) shared_outs(%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}) -> (tensor<?x32x32xf32>)
// CHECK: tensor.extract_slice %{{.+}} : tensor<?x32x32xf32> to tensor<?x16x32xf32>
// CHECK: scf.forall.in_parallel
// CHECK-NOT: scf.forall (
// CHECK: return
func.func private @symbolic_wide_linear(%a: tensor<1x?x512xf32>, %b: tensor<512x1024xf32>, %c: tensor<1x?x1024xf32>) -> tensor<1x?x1024xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<1x?x1024xf32>) -> tensor<1x?x1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<1x?x512xf32>, tensor<512x1024xf32>) outs(%f : tensor<1x?x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x?x1024xf32>
  return %r : tensor<1x?x1024xf32>
}

// -----

// A linear with a bias + ReLU epilogue in place on C, as fusion leaves it. The epilogue reads C's
// [64, 8, 32] panels through a reshape ([64, 256] is the same row-major memory) and writes the
// out-argument: no unpack pass between the two, and no copy of the panels into the output
// after them. The tiles still start from zero vectors: the epilogue's reads come after the
// loop that holds every tile's first read.
// CHECK-LABEL: func.func private @linear_bias_relu
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+1x128", "elementwise-64"]
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.unpack
// CHECK: %[[EMPTY:[a-z0-9_]+]] = tensor.empty() : tensor<64x8x32xf32>
// CHECK: %[[P:[a-z0-9_]+]] = scf.forall {{.*}} shared_outs(%{{[a-z0-9_]+}} = %[[EMPTY]]) -> (tensor<64x8x32xf32>)
// CHECK: arith.constant dense<0.000000e+00> : vector<8x1x32xf32>
// CHECK: %[[C:[a-z0-9_]+]] = tensor.collapse_shape %[[P]] {{\[\[}}0], [1, 2]] : tensor<64x8x32xf32> into tensor<64x256xf32>
// CHECK-NEXT: scf.for {{.*}} iter_args(%{{.+}} = %arg3) -> (tensor<64x256xf32>)
// CHECK: vector.transfer_read %[[C]]
// CHECK: arith.maximumf
// CHECK-NOT: linalg.unpack
func.func private @linear_bias_relu(%a: tensor<64x512xf32>, %b: tensor<512x256xf32>, %bias: tensor<256xf32>, %c: tensor<64x256xf32>) -> tensor<64x256xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<64x256xf32>) -> tensor<64x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<64x512xf32>, tensor<512x256xf32>) outs(%f : tensor<64x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<64x256xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%bias : tensor<256xf32>) outs(%r : tensor<64x256xf32>) {
  ^bb0(%b0: f32, %acc: f32):
    %s = arith.addf %acc, %b0 : f32
    %y = arith.maximumf %s, %zero : f32
    linalg.yield %y : f32
  } -> tensor<64x256xf32>
  return %e : tensor<64x256xf32>
}

// -----

// The same over symbolic rows: both copies of the run-time dispatch (parallel for many rows,
// serial for few) read the [?, 8, 32] panels through a reshape, and neither zeroes them.
// CHECK-LABEL: func.func private @symbolic_linear_bias_relu
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.unpack
// CHECK: scf.if
// CHECK: %[[P:[a-z0-9_]+]] = scf.forall {{.*}} -> (tensor<?x8x32xf32>)
// CHECK: %[[C:[a-z0-9_]+]] = tensor.collapse_shape %[[P]] {{\[\[}}0], [1, 2]] : tensor<?x8x32xf32> into tensor<?x256xf32>
// CHECK: scf.forall {{.*}} shared_outs(%{{.+}} = %arg3) -> (tensor<?x256xf32>)
// CHECK: vector.transfer_read %[[C]]
// CHECK: } else {
// CHECK: %[[C2:[a-z0-9_]+]] = tensor.collapse_shape %{{.+}} {{\[\[}}0], [1, 2]] : tensor<?x8x32xf32> into tensor<?x256xf32>
// CHECK: vector.transfer_read %[[C2]]
// CHECK-NOT: linalg.unpack
func.func private @symbolic_linear_bias_relu(%a: tensor<?x512xf32>, %b: tensor<512x256xf32>, %bias: tensor<256xf32>, %c: tensor<?x256xf32>) -> tensor<?x256xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<?x256xf32>) -> tensor<?x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<?x512xf32>, tensor<512x256xf32>) outs(%f : tensor<?x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x256xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%bias : tensor<256xf32>) outs(%r : tensor<?x256xf32>) {
  ^bb0(%b0: f32, %acc: f32):
    %s = arith.addf %acc, %b0 : f32
    %y = arith.maximumf %s, %zero : f32
    linalg.yield %y : f32
  } -> tensor<?x256xf32>
  return %e : tensor<?x256xf32>
}

// -----

// An epilogue that reads C both as its input and as its init (C * C): it is rewritten once, to
// read the panels' view twice and write the out-argument.
// CHECK-LABEL: func.func private @linear_square
// CHECK-NOT: linalg.unpack
// CHECK: %[[C:[a-z0-9_]+]] = tensor.collapse_shape %{{.+}} {{\[\[}}0], [1, 2]] : tensor<64x8x32xf32> into tensor<64x256xf32>
// CHECK-NEXT: scf.for {{.*}} iter_args(%{{.+}} = %arg2) -> (tensor<64x256xf32>)
// CHECK: %[[V:[a-z0-9_]+]] = vector.transfer_read %[[C]]
// CHECK: arith.mulf %[[V]], %[[V]] : vector<64xf32>
func.func private @linear_square(%a: tensor<64x512xf32>, %b: tensor<512x256xf32>, %c: tensor<64x256xf32>) -> tensor<64x256xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<64x256xf32>) -> tensor<64x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<64x512xf32>, tensor<512x256xf32>) outs(%f : tensor<64x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<64x256xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%r : tensor<64x256xf32>) outs(%r : tensor<64x256xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %y = arith.mulf %v, %acc : f32
    linalg.yield %y : f32
  } -> tensor<64x256xf32>
  return %e : tensor<64x256xf32>
}
