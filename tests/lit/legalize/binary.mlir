// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// Broadcasting reads the smaller operand through its own indexing map.
// CHECK-DAG: #[[ROW:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @add_broadcast
// CHECK-SAME: (%[[A:[^:]+]]: tensor<3x4xf32>, %[[B:[^:]+]]: tensor<4xf32>)
// CHECK-NOT: "relax.add"
// CHECK: "relax.call_tir"(%[[A]], %[[B]]) {callee = @add}
// CHECK: func.func private @add(
// CHECK: linalg.generic {indexing_maps = [#{{.+}}, #[[ROW]], #{{.+}}]
// CHECK: arith.addf
func.func @add_broadcast(%a: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> attributes {relax.function} {
  %0 = "relax.add"(%a, %b) : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// A one-element constant operand is folded into the kernel as a scalar (TVM's _binary).
// CHECK-LABEL: func.func @scalar_operand
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK: "relax.call_tir"(%[[X]]) {callee = @multiply}
// CHECK: func.func private @multiply(%{{.+}}: tensor<4xf32>, %{{.+}}: tensor<4xf32>)
// CHECK: %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK: arith.mulf %{{.+}}, %[[TWO]]
func.func @scalar_operand(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %c = "relax.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "relax.multiply"(%x, %c) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Comparisons produce bool tensors, stored as bytes (i8).
// CHECK-LABEL: func.func @less_then_where
// CHECK: %[[MASK:.+]] = "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @less} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi8>
// CHECK: "relax.call_tir"(%[[MASK]], %{{.+}}, %{{.+}}) {callee = @where}
// CHECK: func.func private @less(
// CHECK: arith.cmpf olt
// CHECK: arith.extui %{{.+}} : i1 to i8
// CHECK: func.func private @where(
// CHECK: arith.select
func.func @less_then_where(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %m = "relax.less"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi8>
  %0 = "relax.where"(%m, %a, %b) : (tensor<4xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// atan2 and copysign are math dialect ops on the broadcast elements; relax.mod (torch.fmod,
// the sign of the dividend) is arith.remf, where floor_mod takes the floor.
// CHECK-LABEL: func.func @atan2_copysign_mod
// CHECK-SAME: (%[[A:[^:]+]]: tensor<3x4xf32>, %[[B:[^:]+]]: tensor<4xf32>)
// CHECK-NOT: "relax.atan2"
// CHECK: %[[T:.+]] = "relax.call_tir"(%[[A]], %[[B]]) {callee = @atan2}
// CHECK: %[[S:.+]] = "relax.call_tir"(%[[T]], %[[B]]) {callee = @copysign}
// CHECK: "relax.call_tir"(%[[S]], %[[B]]) {callee = @mod}
// CHECK: func.func private @atan2(
// CHECK: math.atan2 %{{.+}}, %{{.+}} : f32
// CHECK: func.func private @copysign(
// CHECK: math.copysign %{{.+}}, %{{.+}} : f32
// CHECK: func.func private @mod(
// CHECK-NOT: math.floor
// CHECK: arith.remf %{{.+}}, %{{.+}} : f32
func.func @atan2_copysign_mod(%a: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> attributes {relax.function} {
  %0 = "relax.atan2"(%a, %b) : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %1 = "relax.copysign"(%0, %b) : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %2 = "relax.mod"(%1, %b) : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  return %2 : tensor<3x4xf32>
}

// -----

// hypot of float32 squares in float64 (no overflow, glibc's hypotf), infinity winning over NaN;
// float16 operands go through float32 first (two casts around it). A 16-bit atan2 runs in f32.
// CHECK-LABEL: func.func @hypot_atan2_f16
// CHECK: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @hypot} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @atan2} : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
// CHECK: func.func private @hypot(
// CHECK: %[[INF:.+]] = arith.cmpf oeq
// CHECK: arith.extf %{{.+}} : f32 to f64
// CHECK: math.sqrt %{{.+}} : f64
// CHECK: %[[R:.+]] = arith.truncf %{{.+}} : f64 to f32
// CHECK: arith.select %{{.+}}, %{{.+}}, %[[R]] : f32
// CHECK: func.func private @atan2(
// CHECK: math.atan2 %{{.+}}, %{{.+}} : f32
// CHECK: arith.truncf %{{.+}} : f32 to f16
func.func @hypot_atan2_f16(%a: tensor<4xf16>, %b: tensor<4xf16>) -> tensor<4xf16> attributes {relax.function} {
  %0 = "relax.hypot"(%a, %b) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  %1 = "relax.atan2"(%0, %b) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return %1 : tensor<4xf16>
}
