// RUN: relaxmlir-opt %s -split-input-file --relax-legalize-ops | FileCheck %s
// A smoke test of the pass over three op families and the sharing of identical PrimFuncs.

// Each high-level op becomes a call_tir of a destination-passing PrimFunc built from topi, with
// the same operands, result type and symbolic shape.
// CHECK-LABEL: func.func @mlp_layer
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x4xf32> {{.*}}, %[[W:[^:]+]]: tensor<4x3xf32> {{.*}}, %[[B:[^:]+]]: tensor<3xf32> {{.*}})
// CHECK-NOT: "relax.matmul"
// CHECK: %[[MM:.+]] = "relax.call_tir"(%[[X]], %[[W]]) {callee = @[[MATMUL:[a-z_0-9]+]], {{.*}}relax.shape = {{\[}}["n", 3]]
// CHECK: %[[ADD:.+]] = "relax.call_tir"(%[[MM]], %[[B]]) {callee = @[[BIAS:[a-z_0-9]+]],
// CHECK: %[[RELU:.+]] = "relax.call_tir"(%[[ADD]]) {callee = @[[RELU_FN:[a-z_0-9]+]],
// CHECK: scf.yield %[[RELU]]
// CHECK: func.func private @[[MATMUL]]({{.*}}: tensor<?x4xf32> {{.*}}, {{.*}}: tensor<4x3xf32>, %[[OUT:[^:]+]]: tensor<?x3xf32> {{.*}}) -> tensor<?x3xf32> attributes {relax.prim_func}
// CHECK: linalg.fill {{.*}} outs(%[[OUT]]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: func.func private @[[BIAS]](
// CHECK: linalg.generic {{.*}} ins({{.*}} : tensor<?x3xf32>, tensor<3xf32>)
// CHECK: arith.addf
// CHECK: func.func private @[[RELU_FN]](
// CHECK: arith.maximumf
func.func @mlp_layer(%x: tensor<?x4xf32> {relax.name = "x", relax.shape = ["n", 4]}, %w: tensor<4x3xf32> {relax.name = "w"}, %b: tensor<3xf32> {relax.name = "b"}) -> tensor<?x3xf32> attributes {relax.function} {
  %gv = scf.execute_region -> tensor<?x3xf32> no_inline {
    %lv0 = "relax.matmul"(%x, %w) {out_dtype = "float32", relax.shape = [["n", 3]]} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %lv1 = "relax.add"(%lv0, %b) {relax.shape = [["n", 3]]} : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
    %lv2 = "relax.nn_relu"(%lv1) {relax.shape = [["n", 3]]} : (tensor<?x3xf32>) -> tensor<?x3xf32>
    scf.yield %lv2 : tensor<?x3xf32>
  } {relax.dataflow}
  return %gv : tensor<?x3xf32>
}

// -----

// Two ops with identical PrimFunc bodies share one PrimFunc.
// CHECK-LABEL: func.func @shared_prim_func
// CHECK: "relax.call_tir"({{.*}}) {callee = @[[EXP:[a-z_0-9]+]]{{[,}]}}
// CHECK: "relax.call_tir"({{.*}}) {callee = @[[EXP]]{{[,}]}}
// CHECK: func.func private @[[EXP]](
// CHECK-NOT: func.func private
func.func @shared_prim_func(%x: tensor<8xf32> {relax.name = "x"}) -> tensor<8xf32> attributes {relax.function} {
  %0 = "relax.exp"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %1 = "relax.exp"(%0) : (tensor<8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}
