// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' -split-input-file | FileCheck %s

// Sum over the contiguous (last) axis: 8 rows at a time each keep 16 partial sums in a vector
// (8 independent add chains) and reduce them once at the end, instead of a horizontal reduction
// per element.
// CHECK-LABEL: func.func private @sum_rows
// CHECK-SAME: relax.schedule = ["reduction-inner-8x16"]
// CHECK-NOT: linalg.generic
// CHECK: scf.for
// CHECK: %[[PARTIAL:.+]] = scf.for {{.*}} step %c16 {{.*}} -> (vector<8x16xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<64x784xf32>, vector<8x16xf32>
// CHECK: arith.addf %{{.+}}, %{{.+}} : vector<8x16xf32>
// CHECK: %[[ROW:.+]] = vector.extract %[[PARTIAL]][0] : vector<16xf32> from vector<8x16xf32>
// CHECK: vector.reduction <add>, %[[ROW]]
// CHECK-COUNT-7: vector.reduction <add>
func.func private @sum_rows(%a: tensor<64x784xf32>, %c: tensor<64xf32>) -> tensor<64xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : tensor<64xf32>) -> tensor<64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<64x784xf32>) outs(%f : tensor<64xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

// Max over the outer axis: vectorize along the contiguous output axis, accumulate row by row.
// CHECK-LABEL: func.func private @max_cols
// CHECK-SAME: relax.schedule = ["reduction-outer-64"]
// CHECK: scf.for {{.*}} -> (vector<64xf32>)
// CHECK: arith.maximumf %{{.+}}, %{{.+}} : vector<64xf32>
func.func private @max_cols(%a: tensor<300x64xf32>, %c: tensor<64xf32>) -> tensor<64xf32> attributes {relax.prim_func} {
  %ninf = arith.constant 0xFF800000 : f32
  %f = linalg.fill ins(%ninf : f32) outs(%c : tensor<64xf32>) -> tensor<64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<300x64xf32>) outs(%f : tensor<64xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.maximumf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

// Max over the contiguous axis of 37 rows (a prime: no block of 4 or more divides them): 32
// rows in 8-row blocks, then the last 5 in one block, each row with its own chain of
// vectors; one row a step left each row's maxima a chain of dependent ops.
// CHECK-LABEL: func.func private @max_prime_rows
// CHECK-SAME: relax.schedule = ["reduction-inner-8x16+5x16"]
// CHECK: scf.for %{{.+}} = %c0 to %c32 step %c8
// CHECK: scf.for {{.*}} step %c16 {{.*}} -> (vector<8x16xf32>)
// CHECK: arith.maximumf %{{.+}}, %{{.+}} : vector<8x16xf32>
// CHECK: scf.for {{.*}} step %c16 {{.*}} -> (vector<5x16xf32>)
// CHECK: arith.maximumf %{{.+}}, %{{.+}} : vector<5x16xf32>
func.func private @max_prime_rows(%a: tensor<37x100xf32>, %c: tensor<37xf32>) -> tensor<37xf32> attributes {relax.prim_func} {
  %ninf = arith.constant 0xFF800000 : f32
  %f = linalg.fill ins(%ninf : f32) outs(%c : tensor<37xf32>) -> tensor<37xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<37x100xf32>) outs(%f : tensor<37xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.maximumf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<37xf32>
  return %r : tensor<37xf32>
}
