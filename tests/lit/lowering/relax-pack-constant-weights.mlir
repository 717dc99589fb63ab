// RUN: relaxmlir-opt %s '--relax-pack-constant-weights{target="llvm -mcpu=x86-64-v4"}' --symbol-dce -split-input-file | FileCheck %s

#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// A dense layer (x @ w.T) whose weight is a constant: the constant becomes its 32-wide panels
// [ceil(N/32), K, 32] and the kernel a copy that unpacks them (folded away by the schedule).
// CHECK-LABEL: func.func private @dense_prepacked
// CHECK-SAME: (%{{[^:]+}}: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<1x8x32xf32>, %{{[^:]+}}: tensor<4x16xf32>)
// CHECK: linalg.unpack %[[W]] inner_dims_pos = [0] inner_tiles = [32] into %{{.+}} {relax.prepacked} : tensor<1x8x32xf32> -> tensor<16x8xf32>
// CHECK-LABEL: func.func @main
// CHECK: %[[P:.+]] = "relax.constant"() {value = dense<{{.+}}> : tensor<1x8x32xf32>}
// CHECK: "relax.call_tir"(%{{.+}}, %[[P]]) {callee = @dense_prepacked}
// CHECK-NOT: func.func private @dense(
func.func private @dense(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %out: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%out : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x8xf32>, tensor<16x8xf32>) outs(%f : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

func.func @main(%x: tensor<4x8xf32>) -> tensor<4x16xf32> attributes {relax.function} {
  %w = "relax.constant"() {value = dense<0.5> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %0 = "relax.call_tir"(%x, %w) {callee = @dense} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// A transformer's linear layer on [1, s, k] activations (TE reads x with a constant-0 batch
// index): classified after unit dims are dropped, as the schedule sees it, so its weight [K, N]
// is packed too.
// CHECK-LABEL: func.func private @linear3d_prepacked
// CHECK-SAME: %[[W:[^:]+]]: tensor<1x8x32xf32>
// CHECK: linalg.unpack %[[W]] outer_dims_perm = [1, 0] inner_dims_pos = [1] inner_tiles = [32]
// CHECK-LABEL: func.func @main
// CHECK: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @linear3d_prepacked}
func.func private @linear3d(%x: tensor<1x4x8xf32>, %w: tensor<8x16xf32>, %out: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%out : tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %w : tensor<1x4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<1x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x4x16xf32>
  return %r : tensor<1x4x16xf32>
}

func.func @main(%x: tensor<1x4x8xf32>) -> tensor<1x4x16xf32> attributes {relax.function} {
  %w = "relax.constant"() {value = dense<0.5> : tensor<8x16xf32>} : () -> tensor<8x16xf32>
  %0 = "relax.call_tir"(%x, %w) {callee = @linear3d} : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
  return %0 : tensor<1x4x16xf32>
}
