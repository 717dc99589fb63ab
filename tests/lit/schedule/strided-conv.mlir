// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s

// A 3x3 / 2 window in the channel-blocked layout (lowering/schedule/phases.py): split by input
// phase into 4 unit-stride convolutions over strided views of the image and the weight, with
// only their own taps (2x2, 2x1, 1x2, 1x1: 9 in all), each accumulating into the previous one's
// result. The last one's rule takes the others and the bias + ReLU epilogue (the conv rule's
// `absorbs`): one loop nest over the epilogue's register tiles, in which each 2 x 8 x 16 tile
// starts from zero vectors (no fill of the output), sums the 4 phases in registers, goes
// through the epilogue (the bias read as 2 x 16) and is written once.
// CHECK-LABEL: func.func private @conv3x3s2
// CHECK-SAME: relax.schedule = ["fused-into-3", "fused-into-3", "fused-into-3", "conv-2x8x16+epilogue", "fused-into-3"]
// CHECK-NOT: linalg.fill
// CHECK: tensor.extract_slice %arg0[0, 0, 0, 0, 0] [1, 2, 9, 9, 16] [1, 1, 2, 2, 1]
// CHECK: tensor.extract_slice %arg1[0, 0, 0, 0, 0, 0] [2, 2, 2, 2, 16, 16] [1, 1, 2, 2, 1, 1]
// CHECK: tensor.extract_slice %arg0[0, 0, 0, 1, 0] [1, 2, 9, 8, 16] [1, 1, 2, 2, 1]
// CHECK: tensor.extract_slice %arg1[0, 0, 0, 1, 0, 0] [2, 2, 2, 1, 16, 16] [1, 1, 2, 2, 1, 1]
// CHECK: tensor.extract_slice %arg0[0, 0, 1, 0, 0] [1, 2, 8, 9, 16] [1, 1, 2, 2, 1]
// CHECK: tensor.extract_slice %arg1[0, 0, 1, 0, 0, 0] [2, 2, 1, 2, 16, 16] [1, 1, 2, 2, 1, 1]
// CHECK: tensor.extract_slice %arg0[0, 0, 1, 1, 0] [1, 2, 8, 8, 16] [1, 1, 2, 2, 1]
// CHECK: tensor.extract_slice %arg1[0, 0, 1, 1, 0, 0] [2, 2, 1, 1, 16, 16] [1, 1, 2, 2, 1, 1]
// CHECK-NOT: tensor.extract_slice %arg{{[01]}}
// CHECK: scf.for %{{.+}} = %c0 to %c8 step %c1 iter_args(%[[OUT:.+]] = %arg3) -> (tensor<1x2x8x8x16xf32>)
// CHECK: %[[ZERO:.+]] = vector.shape_cast %cst{{.*}} : vector<2x1x8x16xf32> to vector<2x8x16xf32>
// CHECK: %[[P1:.+]] = scf.for {{.+}} iter_args(%{{.+}} = %[[ZERO]]) -> (vector<2x8x16xf32>)
// CHECK: %[[P2:.+]] = scf.for {{.+}} iter_args(%{{.+}} = %[[P1]]) -> (vector<2x8x16xf32>)
// CHECK: %[[P3:.+]] = scf.for {{.+}} iter_args(%{{.+}} = %[[P2]]) -> (vector<2x8x16xf32>)
// CHECK: %[[P4:.+]] = scf.for {{.+}} iter_args(%{{.+}} = %[[P3]]) -> (vector<2x8x16xf32>)
// CHECK: vector.transfer_read %arg2[%c0, %c0, %c0, %c0, %c0], %{{.+}} : tensor<1x2x1x1x16xf32>, vector<2x16xf32>
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: vector.transfer_write %{{.+}}, %{{.+}} : vector<2x1x8x16xf32>, tensor<1x2x1x8x16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: return

#in = affine_map<(n, f, y, x, v, c, ky, kx, ci) -> (n, c, 2 * y + ky, 2 * x + kx, ci)>
#w = affine_map<(n, f, y, x, v, c, ky, kx, ci) -> (f, c, ky, kx, ci, v)>
#out = affine_map<(n, f, y, x, v, c, ky, kx, ci) -> (n, f, y, x, v)>
#id = affine_map<(n, f, y, x, v) -> (n, f, y, x, v)>
#bias = affine_map<(n, f, y, x, v) -> (0, f, 0, 0, v)>
func.func private @conv3x3s2(%x: tensor<1x2x17x17x16xf32>, %w: tensor<2x2x3x3x16x16xf32>, %b: tensor<1x2x1x1x16xf32>, %o: tensor<1x2x8x8x16xf32>) -> tensor<1x2x8x8x16xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2x8x8x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x8x8x16xf32>) -> tensor<1x2x8x8x16xf32>
  %c = linalg.generic {indexing_maps = [#in, #w, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]} ins(%x, %w : tensor<1x2x17x17x16xf32>, tensor<2x2x3x3x16x16xf32>) outs(%fill : tensor<1x2x8x8x16xf32>) {
  ^bb0(%a: f32, %k: f32, %acc: f32):
    %p = arith.mulf %a, %k : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x2x8x8x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%c, %b : tensor<1x2x8x8x16xf32>, tensor<1x2x1x1x16xf32>) outs(%o : tensor<1x2x8x8x16xf32>) {
  ^bb0(%a: f32, %k: f32, %acc: f32):
    %s = arith.addf %a, %k : f32
    %m = arith.maximumf %s, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x2x8x8x16xf32>
  return %r : tensor<1x2x8x8x16xf32>
}
