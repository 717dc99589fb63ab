// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// A bfloat16 softmax runs in float32 between two casts (torch's CPU accumulation type).
// CHECK-LABEL: func.func @softmax_bf16
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x8xbf16>)
// CHECK-NOT: "relax.nn_softmax"
// CHECK: %[[UP:.+]] = "relax.call_tir"(%[[X]]) {callee = @astype} : (tensor<2x8xbf16>) -> tensor<2x8xf32>
// CHECK: %[[SM:.+]] = "relax.call_tir"(%[[UP]]) {callee = @softmax} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK: "relax.call_tir"(%[[SM]]) {callee = @astype{{.*}}} : (tensor<2x8xf32>) -> tensor<2x8xbf16>
func.func @softmax_bf16(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> attributes {relax.function} {
  %0 = "relax.nn_softmax"(%x) {axis = -1 : i64} : (tensor<2x8xbf16>) -> tensor<2x8xbf16>
  return %0 : tensor<2x8xbf16>
}

// -----

// An elementwise add stays in float16 (correctly rounded there).
// CHECK-LABEL: func.func @add_f16
// CHECK: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @add} : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
// CHECK-NOT: tensor<4xf32>
func.func @add_f16(%a: tensor<4xf16>, %b: tensor<4xf16>) -> tensor<4xf16> attributes {relax.function} {
  %0 = "relax.add"(%a, %b) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// Bool operands are marked relax.dtype: bool + bool is a logical or, kept as a bool.
// CHECK-LABEL: func.func @bool_add
// CHECK: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @add, relax.dtype = ["bool"]}
// CHECK: func.func private @add(
// CHECK: arith.cmpi ne
func.func @bool_add(%a: tensor<4xi8> {relax.dtype = "bool"}, %b: tensor<4xi8> {relax.dtype = "bool"}) -> (tensor<4xi8> {relax.dtype = "bool"}) attributes {relax.function} {
  %0 = "relax.add"(%a, %b) {relax.dtype = ["bool"]} : (tensor<4xi8>, tensor<4xi8>) -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// uint8 tensors are i8 marked relax.dtype (the kernels' signless type): the cast to float is
// unsigned.
// CHECK-LABEL: func.func @uint8_to_float
// CHECK: "relax.call_tir"(%{{.+}}) {callee = @astype} : (tensor<4xi8>) -> tensor<4xf32>
// CHECK: func.func private @astype(
// CHECK: arith.uitofp %{{.+}} : i8 to f32
func.func @uint8_to_float(%a: tensor<4xi8> {relax.dtype = "uint8"}) -> tensor<4xf32> attributes {relax.function} {
  %0 = "relax.astype"(%a) {dtype = "float32"} : (tensor<4xi8>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Integer power is square and multiply over the exponent's bits (wrapping as torch), with
// torch's results for negative exponents; no float pow.
// CHECK-LABEL: func.func @power_int32
// CHECK: func.func private @power(
// CHECK-NOT: math.powf
// CHECK: arith.cmpi slt
// CHECK: arith.shrui
// CHECK: arith.muli
func.func @power_int32(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> attributes {relax.function} {
  %0 = "relax.power"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Bitwise ops are arith.xori/andi/ori on the integers.
// CHECK-LABEL: func.func @bitwise_int32
// CHECK: func.func private @bitwise_xor(
// CHECK: arith.xori %{{.+}}, %{{.+}} : i32
// CHECK: func.func private @bitwise_not(
// CHECK: arith.constant -1 : i32
// CHECK: arith.xori
func.func @bitwise_int32(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> attributes {relax.function} {
  %0 = "relax.bitwise_xor"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %1 = "relax.bitwise_not"(%0) : (tensor<4xi32>) -> tensor<4xi32>
  return %1 : tensor<4xi32>
}
