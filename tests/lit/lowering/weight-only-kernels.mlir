// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1}' | FileCheck %s

// A kernel that only main_transform_params calls (LiftTransformParams: it runs once per set of
// weights) keeps its naive loops; the same computation called from main is scheduled.
// CHECK-LABEL: func.func private @relu_weights
// CHECK-NOT: relax.schedule
// CHECK: linalg.generic
// CHECK-LABEL: func.func private @relu_inputs
// CHECK-SAME: relax.schedule = ["elementwise{{.*}}"]
// CHECK-NOT: linalg.generic
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func private @relu_weights(%a: tensor<64x128xf32>, %out: tensor<64x128xf32>) -> tensor<64x128xf32> attributes {relax.prim_func} {
  %0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<64x128xf32>) outs(%out : tensor<64x128xf32>) {
  ^bb0(%in: f32, %o: f32):
    %cst = arith.constant 0.000000e+00 : f32
    %m = arith.maximumf %in, %cst : f32
    linalg.yield %m : f32
  } -> tensor<64x128xf32>
  return %0 : tensor<64x128xf32>
}
func.func private @relu_inputs(%a: tensor<64x128xf32>, %out: tensor<64x128xf32>) -> tensor<64x128xf32> attributes {relax.prim_func} {
  %0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<64x128xf32>) outs(%out : tensor<64x128xf32>) {
  ^bb0(%in: f32, %o: f32):
    %cst = arith.constant 0.000000e+00 : f32
    %m = arith.maximumf %in, %cst : f32
    linalg.yield %m : f32
  } -> tensor<64x128xf32>
  return %0 : tensor<64x128xf32>
}
func.func @main_transform_params(%w: tensor<64x128xf32>) -> tensor<64x128xf32> attributes {relax.function, relax.num_input = 0 : i64} {
  %0 = "relax.call_tir"(%w) {callee = @relu_weights} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  return %0 : tensor<64x128xf32>
}
func.func @main(%x: tensor<64x128xf32>, %w: tensor<64x128xf32>) -> tensor<64x128xf32> attributes {relax.function, relax.num_input = 1 : i64, relax.transform_params = @main_transform_params} {
  %0 = "relax.call_tir"(%x) {callee = @relu_inputs} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  %1 = "relax.add"(%0, %w) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  return %1 : tensor<64x128xf32>
}
