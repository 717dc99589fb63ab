// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' | FileCheck %s

// A softmax over rows beyond the caches (2200 x 1000 f32, 8.8 MB) runs as one chain of row
// passes (`reduction.row_chain`): each thread takes 1100 rows, a loop walks them 5 at a time,
// and the four ops (max, exp, sum, scale) are fused in its body, each vectorized on the block
// (exp as its polynomial: the roundeven of its range reduction);
// no 2200 x 1000 intermediate is left (exp's values live in a 5 x 1000 block).
// CHECK-LABEL: func.func private @chain
// CHECK-SAME: relax.schedule = ["row-chain-4x5", "fused-into-0", "fused-into-0", "fused-into-0"]
// CHECK-NOT: tensor.empty() : tensor<2200x1000xf32>
// CHECK: tensor.empty() : tensor<5x1000xf32>
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c5
// CHECK: vector.reduction <maximumf>
// CHECK: math.roundeven
// CHECK: vector.reduction <add>
// CHECK: arith.divf
// CHECK: tensor.parallel_insert_slice %{{.+}} into %{{.+}}[%{{.+}}, 0] [1100, 1000] [1, 1]
#full = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func private @chain(%x: tensor<2200x1000xf32>, %g: tensor<1000xf32>, %o: tensor<2200x1000xf32>) -> tensor<2200x1000xf32> attributes {relax.prim_func} {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e0 = tensor.empty() : tensor<2200xf32>
  %f0 = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<2200xf32>) -> tensor<2200xf32>
  %max = linalg.generic {indexing_maps = [#full, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<2200x1000xf32>) outs(%f0 : tensor<2200xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %acc, %a : f32
    linalg.yield %m : f32
  } -> tensor<2200xf32>
  %e1 = tensor.empty() : tensor<2200x1000xf32>
  %exp = linalg.generic {indexing_maps = [#full, #row, #full], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<2200x1000xf32>, tensor<2200xf32>) outs(%e1 : tensor<2200x1000xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %d = arith.subf %a, %m : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<2200x1000xf32>
  %e2 = tensor.empty() : tensor<2200xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2200xf32>) -> tensor<2200xf32>
  %sum = linalg.generic {indexing_maps = [#full, #row], iterator_types = ["parallel", "reduction"]} ins(%exp : tensor<2200x1000xf32>) outs(%f2 : tensor<2200xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<2200xf32>
  %y = linalg.generic {indexing_maps = [#full, #row, #full], iterator_types = ["parallel", "parallel"]} ins(%exp, %sum : tensor<2200x1000xf32>, tensor<2200xf32>) outs(%o : tensor<2200x1000xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %inv = arith.divf %one, %s : f32
    %p = arith.mulf %a, %inv : f32
    linalg.yield %p : f32
  } -> tensor<2200x1000xf32>
  return %y : tensor<2200x1000xf32>
}
