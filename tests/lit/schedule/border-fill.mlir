// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s

// The border of a padded buffer whose interior another op writes (pad._border: one fill per
// padded side) is filled with vector stores in loops kept rolled. Left to the default lowering,
// each 16-lane column of the left and right sides was a 64-byte memset, and LLVM unrolled their
// loops in full (MobileNetV2: 1044 in one block, 0.58 s of llc).
// CHECK-LABEL: func.func private @relu_into_padded
// CHECK-SAME: relax.schedule = ["elementwise-16"]
// CHECK-NOT: linalg.fill
// CHECK: scf.for
// CHECK: scf.for
// CHECK: vector.transfer_write %cst, %{{.+}} {in_bounds = [true]} : vector<16xf32>, tensor<1x1x1x1x16xf32>
// CHECK: } {loop_annotation = #loop_annotation}
// CHECK: } {loop_annotation = #loop_annotation}
// CHECK: tensor.insert_slice %{{.+}} into %{{.+}}[0, 0, 0, 0, 0] [1, 2, 1, 8, 16]
// CHECK: tensor.insert_slice %{{.+}} into %{{.+}}[0, 0, 7, 0, 0] [1, 2, 1, 8, 16]
// CHECK: vector.transfer_write %cst, %{{.+}} : vector<16xf32>, tensor<1x1x1x1x16xf32>
// CHECK: } {loop_annotation = #loop_annotation}
// CHECK: tensor.insert_slice %{{.+}} into %{{.+}}[0, 0, 0, 0, 0] [1, 2, 8, 1, 16]
// CHECK: tensor.insert_slice %{{.+}} into %{{.+}}[0, 0, 0, 7, 0] [1, 2, 8, 1, 16]
// CHECK: tensor.insert_slice %{{.+}} into %{{.+}}[0, 0, 1, 1, 0] [1, 2, 6, 6, 16]
// CHECK-NOT: linalg.fill
// CHECK: return
func.func private @relu_into_padded(%x: tensor<1x2x6x6x16xf32>, %o: tensor<1x2x8x8x16xf32>) -> tensor<1x2x8x8x16xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<1x2x6x6x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<1x2x6x6x16xf32>) outs(%e0 : tensor<1x2x6x6x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x2x6x6x16xf32>
  %e = tensor.empty() : tensor<1x2x8x8x16xf32>
  %s0 = tensor.extract_slice %e[0, 0, 0, 0, 0] [1, 2, 1, 8, 16] [1, 1, 1, 1, 1] : tensor<1x2x8x8x16xf32> to tensor<1x2x1x8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<1x2x1x8x16xf32>) -> tensor<1x2x1x8x16xf32>
  %i0 = tensor.insert_slice %f0 into %e[0, 0, 0, 0, 0] [1, 2, 1, 8, 16] [1, 1, 1, 1, 1] : tensor<1x2x1x8x16xf32> into tensor<1x2x8x8x16xf32>
  %s1 = tensor.extract_slice %i0[0, 0, 7, 0, 0] [1, 2, 1, 8, 16] [1, 1, 1, 1, 1] : tensor<1x2x8x8x16xf32> to tensor<1x2x1x8x16xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%s1 : tensor<1x2x1x8x16xf32>) -> tensor<1x2x1x8x16xf32>
  %i1 = tensor.insert_slice %f1 into %i0[0, 0, 7, 0, 0] [1, 2, 1, 8, 16] [1, 1, 1, 1, 1] : tensor<1x2x1x8x16xf32> into tensor<1x2x8x8x16xf32>
  %s2 = tensor.extract_slice %i1[0, 0, 0, 0, 0] [1, 2, 8, 1, 16] [1, 1, 1, 1, 1] : tensor<1x2x8x8x16xf32> to tensor<1x2x8x1x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%s2 : tensor<1x2x8x1x16xf32>) -> tensor<1x2x8x1x16xf32>
  %i2 = tensor.insert_slice %f2 into %i1[0, 0, 0, 0, 0] [1, 2, 8, 1, 16] [1, 1, 1, 1, 1] : tensor<1x2x8x1x16xf32> into tensor<1x2x8x8x16xf32>
  %s3 = tensor.extract_slice %i2[0, 0, 0, 7, 0] [1, 2, 8, 1, 16] [1, 1, 1, 1, 1] : tensor<1x2x8x8x16xf32> to tensor<1x2x8x1x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%s3 : tensor<1x2x8x1x16xf32>) -> tensor<1x2x8x1x16xf32>
  %i3 = tensor.insert_slice %f3 into %i2[0, 0, 0, 7, 0] [1, 2, 8, 1, 16] [1, 1, 1, 1, 1] : tensor<1x2x8x1x16xf32> into tensor<1x2x8x8x16xf32>
  %out = tensor.insert_slice %r into %i3[0, 0, 1, 1, 0] [1, 2, 6, 6, 16] [1, 1, 1, 1, 1] : tensor<1x2x6x6x16xf32> into tensor<1x2x8x8x16xf32>
  return %out : tensor<1x2x8x8x16xf32>
}
