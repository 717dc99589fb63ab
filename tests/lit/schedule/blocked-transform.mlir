// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v3" threads=1 strict=true}' | FileCheck %s

// An NCHW -> NCHW8c transform of a kernel argument (`8 * f + v` on the channel axis: TE's
// layout_transform of a tensor that enters the kernel, ShuffleNetV2's untouched half before the
// channel concat) in the same kernel as a pointwise conv in the blocked layout. The transform's
// channel axis is split into [blocks, 8] (an expand_shape view of the argument, read by a plain
// permutation: the transpose rule), while the conv keeps its 1x1 window for the conv rule.
// Before, the conv's unit window kept the whole kernel from that rewrite and the transform ran
// as naive loops ("fallback").
// CHECK-LABEL: func.func private @pointwise_beside_transform
// CHECK-SAME: relax.schedule = ["conv-1x7x8+epilogue", "transpose-7x8", "fused-into-0"]
// CHECK: %[[VIEW:.+]] = tensor.expand_shape %arg2 {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 8, 7, 7] : tensor<1x16x7x7xf32> into tensor<1x2x8x7x7xf32>
// CHECK: vector.transfer_read %[[VIEW]]{{.+}} : tensor<1x2x8x7x7xf32>, vector<8x1x7xf32>
// CHECK: vector.transfer_read %arg0{{.+}} : tensor<1x2x7x7x8xf32>, vector<7xf32>
// CHECK: vector.transfer_read %arg1{{.+}} : tensor<2x2x1x1x8x8xf32>, vector<8xf32>
// CHECK: return

#in = affine_map<(n, f, y, x, v, c, ky, kx, ci) -> (n, c, y + ky, x + kx, ci)>
#w = affine_map<(n, f, y, x, v, c, ky, kx, ci) -> (f, c, ky, kx, ci, v)>
#out = affine_map<(n, f, y, x, v, c, ky, kx, ci) -> (n, f, y, x, v)>
#id = affine_map<(n, f, y, x, v) -> (n, f, y, x, v)>
#nchw = affine_map<(n, f, y, x, v) -> (n, 8 * f + v, y, x)>
func.func private @pointwise_beside_transform(%x: tensor<1x2x7x7x8xf32>, %w: tensor<2x2x1x1x8x8xf32>, %y: tensor<1x16x7x7xf32>, %o: tensor<1x2x7x7x8xf32>) -> tensor<1x2x7x7x8xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2x7x7x8xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x7x7x8xf32>) -> tensor<1x2x7x7x8xf32>
  %c = linalg.generic {indexing_maps = [#in, #w, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]} ins(%x, %w : tensor<1x2x7x7x8xf32>, tensor<2x2x1x1x8x8xf32>) outs(%fill : tensor<1x2x7x7x8xf32>) {
  ^bb0(%a: f32, %k: f32, %acc: f32):
    %p = arith.mulf %a, %k : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x2x7x7x8xf32>
  %t = linalg.generic {indexing_maps = [#nchw, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%y : tensor<1x16x7x7xf32>) outs(%e : tensor<1x2x7x7x8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    linalg.yield %a : f32
  } -> tensor<1x2x7x7x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%c, %t : tensor<1x2x7x7x8xf32>, tensor<1x2x7x7x8xf32>) outs(%o : tensor<1x2x7x7x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.maximumf %a, %zero : f32
    %s = arith.addf %m, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x2x7x7x8xf32>
  return %r : tensor<1x2x7x7x8xf32>
}
