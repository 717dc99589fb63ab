// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' -split-input-file | FileCheck %s
// RUN: not relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v3" threads=2 strict=true}' -split-input-file 2>&1 | FileCheck %s --check-prefix=AVX2

// Tuned knobs (lowering/schedule/space.py) reach the rules: a kernel's own
// relax.schedule_knobs, else the module's relax.tuned_knobs table by kernel key. The default
// point of the space is the untuned schedule (8x32 on AVX-512); mr = 4 gives a 4-row
// register tile, threads = 1 keeps the product on one thread.
// CHECK-LABEL: func.func private @four_rows
// CHECK-SAME: relax.schedule = ["matmul-rows-4x32+1x128"]
// CHECK-NOT: scf.forall
// CHECK: scf.for {{.*}} -> (vector<4x32xf32>)
// CHECK-LABEL: func.func private @default_point
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+1x128"]
// CHECK: scf.forall

// The packed route (route = packed; the rule's own choice here is rows), its K cache block and
// the threads' split: kc = 128 blocks K in two, split = n gives each thread half of the N
// panels (the packed route's own choice on this 256 x 256 product is M).
// CHECK-LABEL: func.func private @split_n_kc
// CHECK: scf.forall (%[[T:.+]]) in (2) shared_outs(%{{.*}}) -> (tensor<32x8x8x32xf32>)
// CHECK: tensor.extract_slice %{{.*}}[0, %{{.*}}, 0, 0] [32, 4, 8, 32]
// CHECK: scf.for %{{.*}} = %c0 to %c256 step %c128

// c_layout = inplace (packed route): the register tiles accumulate in C itself, seen as
// [M/8, 8, N/32, 32] (a reshape, no copy), zero filled in place; no packed accumulator, no unpack.
// CHECK-LABEL: func.func private @inplace_c
// CHECK-SAME: relax.schedule = ["matmul-packed-8x32-inplace"]
// CHECK-NOT: linalg.unpack
// CHECK: %[[C:.+]] = tensor.expand_shape %arg2 {{\[\[}}0, 1], [2, 3]] output_shape [32, 8, 8, 32]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[C]] : tensor<32x8x8x32xf32>)
// CHECK: vector.transfer_read %{{.*}} : tensor<16x8x8x32xf32>, vector<8x1x32xf32>
// CHECK: scf.for {{.*}} -> (vector<8x32xf32>)
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2, 3]] : tensor<32x8x8x32xf32> into tensor<256x256xf32>

// A knob outside its legal values is an error naming it (AVX2 holds 6 rows at most).
// AVX2: error: relax-schedule-cpu: matmul.mr=8: the register tile holds 1..6 rows

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func private @four_rows(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>, %c: tensor<256x256xf32>) -> tensor<256x256xf32> attributes {relax.prim_func, relax.schedule_knobs = "{\22matmul.mr\22: 4, \22threads\22: 1}"} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<256x256xf32>, tensor<256x256xf32>) outs(%fill : tensor<256x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func private @default_point(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>, %c: tensor<256x256xf32>) -> tensor<256x256xf32> attributes {relax.prim_func, relax.schedule_knobs = "{\22matmul.mr\22: 8, \22threads\22: 0}"} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<256x256xf32>, tensor<256x256xf32>) outs(%fill : tensor<256x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func private @split_n_kc(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>, %c: tensor<256x256xf32>) -> tensor<256x256xf32> attributes {relax.prim_func, relax.schedule_knobs = "{\22matmul.route\22: \22packed\22, \22matmul.kc\22: 128, \22matmul.split\22: \22n\22}"} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<256x256xf32>, tensor<256x256xf32>) outs(%fill : tensor<256x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func private @inplace_c(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>, %c: tensor<256x256xf32>) -> tensor<256x256xf32> attributes {relax.prim_func, relax.schedule_knobs = "{\22matmul.route\22: \22packed\22, \22matmul.c_layout\22: \22inplace\22, \22threads\22: 1}"} {
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<256x256xf32>, tensor<256x256xf32>) outs(%fill : tensor<256x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}
