// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s

// Elementwise unary ops become one elementwise linalg.generic each; attributes (clip bounds,
// the astype dtype, the leaky_relu slope) are baked into the kernel.

// CHECK-LABEL: func.func @exp
// CHECK-NOT: "relax.exp"
// CHECK: "relax.call_tir"(%[[X:.+]]) {callee = @[[FN:[a-z_0-9]+]]}
// CHECK: func.func private @[[FN]](
// CHECK: iterator_types = ["parallel", "parallel"]
// CHECK: math.exp
func.func @exp(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  %0 = "relax.exp"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @clip
// CHECK: "relax.call_tir"(%{{.+}}) {callee = @[[FN:[a-z_0-9]+]]}
// CHECK: func.func private @[[FN]](
// CHECK: %[[LO:.+]] = arith.constant -5.000000e-01 : f32
// CHECK: %[[MAX:.+]] = arith.maximumf %{{.+}}, %[[LO]]
// CHECK: %[[HI:.+]] = arith.constant 5.000000e-01 : f32
// CHECK: arith.minimumf %[[MAX]], %[[HI]]
func.func @clip(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0 = "relax.clip"(%x) {min = -5.000000e-01 : f64, max = 5.000000e-01 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @astype
// CHECK: "relax.call_tir"(%{{.+}}) {callee = @[[FN:[a-z_0-9]+]]} : (tensor<4xf32>) -> tensor<4xi32>
// CHECK: func.func private @[[FN]](%{{.+}}: tensor<4xf32>, %{{.+}}: tensor<4xi32>)
// CHECK: arith.fptosi %{{.+}} : f32 to i32
func.func @astype(%x: tensor<4xf32>) -> tensor<4xi32> attributes {relax.function} {
  %0 = "relax.astype"(%x) {dtype = "int32"} : (tensor<4xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// The symbolic batch stays symbolic: the call keeps relax.shape and the kernel's types are dynamic.
// CHECK-LABEL: func.func @gelu_symbolic
// CHECK: "relax.call_tir"(%{{.+}}) {callee = @[[FN:[a-z_0-9]+]], relax.shape = {{\[}}["n", 8]]} : (tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK: func.func private @[[FN]](%{{.+}}: tensor<?x8xf32> {relax.shape = ["n", 8]}, %[[OUT:.+]]: tensor<?x8xf32> {relax.shape = ["n", 8]})
// CHECK: math.erf
func.func @gelu_symbolic(%x: tensor<?x8xf32> {relax.name = "x", relax.shape = ["n", 8]}) -> tensor<?x8xf32> attributes {relax.function} {
  %0 = "relax.nn_gelu"(%x) {relax.shape = [["n", 8]]} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// Softmax is three reductions/maps in one kernel; the intermediates are local tensors.
// CHECK-LABEL: func.func @softmax
// CHECK: "relax.call_tir"(%{{.+}}) {callee = @[[FN:[a-z_0-9]+]]}
// CHECK: func.func private @[[FN]](
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
func.func @softmax(%x: tensor<2x5xf32>) -> tensor<2x5xf32> attributes {relax.function} {
  %0 = "relax.nn_softmax"(%x) {axis = 1 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// log1p and expm1 keep their digits near 0: log1p is `log(u) * x / (u - 1)` with `u = 1 + x`
// (never the intrinsic, which lowers to `log(1 + x)`), expm1 is Kahan's form over `exp`.
// CHECK-LABEL: func.func @log1p_expm1
// CHECK: func.func private @[[LOG1P:[a-z_0-9]+]](
// CHECK-NOT: math.log1p
// CHECK: math.log
// CHECK: arith.divf
// CHECK: func.func private @[[EXPM1:[a-z_0-9]+]](
// CHECK: math.exp
// CHECK: math.log
// CHECK: arith.divf
func.func @log1p_expm1(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0 = "relax.log1p"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "relax.expm1"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @trunc_log2_log10
// CHECK: math.trunc
// CHECK: math.log2
// CHECK: math.log10
func.func @trunc_log2_log10(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0 = "relax.trunc"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "relax.log2"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "relax.log10"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// NaN is the value unequal to itself; an integer is never NaN or infinite (a constant kernel).
// CHECK-LABEL: func.func @classify
// CHECK: func.func private @{{[a-z_0-9]+}}(%{{.+}}: tensor<4xf32>, %{{.+}}: tensor<4xi8>)
// CHECK: %[[NAN:.+]] = arith.cmpf une, %[[IN:.+]], %[[IN]] : f32
// CHECK: arith.extui %[[NAN]] : i1 to i8
// CHECK: func.func private @isfinite(%{{.+}}: tensor<4xi32>, %{{.+}}: tensor<4xi8>)
// CHECK: arith.constant true
// CHECK: func.func private @logical_xor(
// CHECK: arith.cmpi ne, %{{.+}}, %{{.+}} : i1
func.func @classify(%x: tensor<4xf32>, %i: tensor<4xi32>) -> tensor<4xi8> attributes {relax.function} {
  %0 = "relax.isnan"(%x) : (tensor<4xf32>) -> tensor<4xi8>
  %1 = "relax.isfinite"(%i) : (tensor<4xi32>) -> tensor<4xi8>
  %2 = "relax.logical_xor"(%0, %1) : (tensor<4xi8>, tensor<4xi8>) -> tensor<4xi8>
  return %2 : tensor<4xi8>
}

// -----

// tan, the inverse trig and hyperbolic functions and exp2 are math dialect ops.
// CHECK-LABEL: func.func @trig
// CHECK: math.tan
// CHECK: math.asin
// CHECK: math.acosh
// CHECK: math.atanh
// CHECK: math.exp2
func.func @trig(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0 = "relax.tan"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "relax.asin"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "relax.acosh"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "relax.atanh"(%2) : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "relax.exp2"(%3) : (tensor<4xf32>) -> tensor<4xf32>
  return %4 : tensor<4xf32>
}
