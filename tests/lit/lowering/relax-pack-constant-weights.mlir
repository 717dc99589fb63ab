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

// -----

// A weight read from a dense_resource blob of the file (as other tools write weights): packed
// like a dense one: w[n, k] = 8 n + k, so the panel row k = 0 starts 0, 8, 16, 24 (f32 bits).
// CHECK-LABEL: func.func private @blob_dense_prepacked
// CHECK-LABEL: func.func @main
// CHECK: "relax.constant"() {value = dense<"0x0000000000000041000080410000C041{{[0-9A-F]+}}"> : tensor<1x8x32xf32>}
func.func private @blob_dense(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %out: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%out : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x8xf32>, tensor<16x8xf32>) outs(%f : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

func.func @main(%x: tensor<4x8xf32>) -> tensor<4x16xf32> attributes {relax.function} {
  %w = "relax.constant"() {value = dense_resource<weight> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %0 = "relax.call_tir"(%x, %w) {callee = @blob_dense} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

{-#
  dialect_resources: {
    builtin: {
      weight: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041000050410000604100007041000080410000884100009041000098410000A0410000A8410000B0410000B8410000C0410000C8410000D0410000D8410000E0410000E8410000F0410000F84100000042000004420000084200000C4200001042000014420000184200001C4200002042000024420000284200002C4200003042000034420000384200003C4200004042000044420000484200004C4200005042000054420000584200005C4200006042000064420000684200006C4200007042000074420000784200007C42000080420000824200008442000086420000884200008A4200008C4200008E42000090420000924200009442000096420000984200009A4200009C4200009E420000A0420000A2420000A4420000A6420000A8420000AA420000AC420000AE420000B0420000B2420000B4420000B6420000B8420000BA420000BC420000BE420000C0420000C2420000C4420000C6420000C8420000CA420000CC420000CE420000D0420000D2420000D4420000D6420000D8420000DA420000DC420000DE420000E0420000E2420000E4420000E6420000E8420000EA420000EC420000EE420000F0420000F2420000F4420000F6420000F8420000FA420000FC420000FE42"
    }
  }
#-}

// -----

// A weight that main_transform_params computes (LiftTransformParams) is packed there: a
// packing kernel (zero rows up to a whole panel, then [1, 32, 8] -> [1, 8, 32]) is appended
// to it, and main takes the panels.
// CHECK-LABEL: func.func private @pack_weight_nk_16x8_32
// CHECK-SAME: (%[[SRC:[^:]+]]: tensor<16x8xf32>, %[[OUT:[^:]+]]: tensor<1x8x32xf32>)
// CHECK: %[[Z:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<32x8xf32>)
// CHECK: %[[P:.+]] = tensor.insert_slice %[[SRC]] into %[[Z]][0, 0] [16, 8] [1, 1]
// CHECK: %[[V:.+]] = tensor.expand_shape %[[P]] {{\[}}[0, 1], [2]] output_shape [1, 32, 8]
// CHECK: linalg.transpose ins(%[[V]] : tensor<1x32x8xf32>) outs(%[[OUT]] : tensor<1x8x32xf32>) permutation = [0, 2, 1]
// CHECK-LABEL: func.func @main_transform_params
// CHECK-SAME: -> tensor<1x8x32xf32>
// CHECK: %[[PACKED:.+]] = "relax.call_tir"(%{{.+}}) {callee = @pack_weight_nk_16x8_32
// CHECK: return %[[PACKED]]
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:[^:]+]]: tensor<1x8x32xf32>
// CHECK: "relax.call_tir"(%{{.+}}, %[[W]]) {callee = @dense_prepacked
#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>
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

func.func @main_transform_params(%w: tensor<16x8xf32> {relax.name = "w"}) -> tensor<16x8xf32> attributes {relax.function, relax.num_input = 0 : i64} {
  %c = "relax.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %s = "relax.multiply"(%w, %c) : (tensor<16x8xf32>, tensor<f32>) -> tensor<16x8xf32>
  return %s : tensor<16x8xf32>
}

func.func @main(%x: tensor<4x8xf32> {relax.name = "x"}, %w: tensor<16x8xf32> {relax.name = "w"}) -> tensor<4x16xf32> attributes {relax.function, relax.num_input = 1 : i64, relax.transform_params = @main_transform_params} {
  %0 = "relax.call_tir"(%x, %w) {callee = @dense} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#nk = affine_map<(d0, d1, d2) -> (d1, d2)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// One constant weight read by two calls (a recurrent cell unrolled over its steps): packed once,
// and both calls read the one packed copy.
// CHECK-LABEL: func.func @main
// CHECK: %[[P:.+]] = "relax.constant"() {value = dense<{{.+}}> : tensor<1x8x32xf32>}
// CHECK-NOT: "relax.constant"
// CHECK: %[[A:.+]] = "relax.call_tir"(%{{.+}}, %[[P]]) {callee = @step_prepacked}
// CHECK: "relax.call_tir"(%[[A]], %[[P]]) {callee = @step_prepacked}
func.func private @step(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %out: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%out : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {relax.function} {
  %w = "relax.constant"() {value = dense<0.5> : tensor<8x8xf32>} : () -> tensor<8x8xf32>
  %0 = "relax.call_tir"(%x, %w) {callee = @step} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = "relax.call_tir"(%0, %w) {callee = @step} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}
