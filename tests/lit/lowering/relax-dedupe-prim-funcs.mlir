// RUN: relaxmlir-opt %s --relax-dedupe-prim-funcs | FileCheck %s

// @relu_a and @relu_b have equal bodies: both calls go to @relu_a and @relu_b is gone. @negate
// differs (another op) and stays.
// CHECK-LABEL: func.func private @relu_a
// CHECK-NOT: func.func private @relu_b
// CHECK-LABEL: func.func private @negate
// CHECK-LABEL: func.func @main
// CHECK: %[[A:.+]] = "relax.call_tir"(%{{.+}}) {callee = @relu_a}
// CHECK: %[[B:.+]] = "relax.call_tir"(%[[A]]) {callee = @relu_a}
// CHECK: "relax.call_tir"(%[[B]]) {callee = @negate}
#id = affine_map<(d0) -> (d0)>
func.func private @relu_a(%x: tensor<8xf32>, %out: tensor<8xf32>) -> tensor<8xf32> attributes {relax.prim_func} {
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%out : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @relu_b(%y: tensor<8xf32>, %res: tensor<8xf32>) -> tensor<8xf32> attributes {relax.prim_func} {
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%y : tensor<8xf32>) outs(%res : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @negate(%x: tensor<8xf32>, %out: tensor<8xf32>) -> tensor<8xf32> attributes {relax.prim_func} {
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%out : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> attributes {relax.function} {
  %0 = "relax.call_tir"(%x) {callee = @relu_a} : (tensor<8xf32>) -> tensor<8xf32>
  %1 = "relax.call_tir"(%0) {callee = @relu_b} : (tensor<8xf32>) -> tensor<8xf32>
  %2 = "relax.call_tir"(%1) {callee = @negate} : (tensor<8xf32>) -> tensor<8xf32>
  return %2 : tensor<8xf32>
}
