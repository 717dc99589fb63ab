// RUN: relaxmlir-opt %s --relax-lift-transform-params -split-input-file | FileCheck %s
// RUN: relaxmlir-opt %s '--relax-lift-transform-params{again=true}' -split-input-file | FileCheck %s --check-prefix=AGAIN

// A linear layer taking its weights as inputs (num_input = 1: x): the transpose of the weight
// and the reshape of the bias read only weights, so they move into @main_transform_params,
// which takes every weight and returns what @main reads after its input: the transposed weight,
// the reshaped bias (each named after its op) and `scale` as it is, in the order first read. Its
// body is a dataflow block, so fusion groups the weight ops as it does main's.
// CHECK-LABEL: func.func @main_transform_params
// CHECK-SAME: (%[[W:[^:]+]]: tensor<16x8xf32> {relax.name = "w"}, %[[B:[^:]+]]: tensor<16xf32> {relax.name = "b"}, %[[S:[^:]+]]: tensor<4x16xf32> {relax.name = "scale"})
// CHECK-SAME: -> (tensor<8x16xf32>, tensor<1x16xf32>, tensor<4x16xf32>)
// CHECK-SAME: relax.num_input = 0
// CHECK: %[[DF:.+]]:3 = scf.execute_region
// CHECK: %[[T:.+]] = "relax.permute_dims"(%[[W]])
// CHECK: %[[R:.+]] = "relax.reshape"(%[[B]])
// CHECK: scf.yield %[[T]], %[[R]], %[[S]]
// CHECK: } {relax.dataflow}
// CHECK: return %[[DF]]#0, %[[DF]]#1, %[[DF]]#2
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32> {relax.name = "x"}, %[[WT:[^:]+]]: tensor<8x16xf32> {relax.name = "permute_dims_0"}, %[[BR:[^:]+]]: tensor<1x16xf32> {relax.name = "reshape_1"}, %[[S2:[^:]+]]: tensor<4x16xf32> {relax.name = "scale"})
// CHECK-SAME: relax.num_input = 1
// CHECK-SAME: relax.transform_params = @main_transform_params
// CHECK-NOT: relax.permute_dims
// CHECK: %[[MM:.+]] = "relax.matmul"(%[[X]], %[[WT]])
// CHECK: %[[ADD:.+]] = "relax.add"(%[[MM]], %[[BR]])
// CHECK: "relax.multiply"(%[[ADD]], %[[S2]])
// AGAIN-LABEL: func.func @main(
// AGAIN: "relax.permute_dims"
func.func @main(%x: tensor<4x8xf32> {relax.name = "x"}, %w: tensor<16x8xf32> {relax.name = "w"}, %b: tensor<16xf32> {relax.name = "b"}, %scale: tensor<4x16xf32> {relax.name = "scale"}) -> tensor<4x16xf32> attributes {relax.function, relax.num_input = 1 : i64} {
  %0 = scf.execute_region -> tensor<4x16xf32> no_inline {
    %t = "relax.permute_dims"(%w) {axes = [1, 0]} : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %mm = "relax.matmul"(%x, %t) {out_dtype = "float32"} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %r = "relax.reshape"(%b) {shape = [1, 16]} : (tensor<16xf32>) -> tensor<1x16xf32>
    %a = "relax.add"(%mm, %r) : (tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
    %m = "relax.multiply"(%a, %scale) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    scf.yield %m : tensor<4x16xf32>
  } {relax.dataflow}
  return %0 : tensor<4x16xf32>
}

// -----

// Split before: a weight op added since (here a second transpose of what main reads) joins the
// computation in @main_transform_params, which now returns its result; a constant it reads is
// copied along.
// AGAIN-LABEL: func.func @main_transform_params
// AGAIN-SAME: -> tensor<16x8xf32>
// AGAIN: %[[T:.+]] = "relax.permute_dims"(%{{.+}})
// AGAIN: %[[T2:.+]] = "relax.permute_dims"(%[[T]])
// AGAIN: %[[C:.+]] = "relax.constant"()
// AGAIN: %[[M:.+]] = "relax.multiply"(%[[T2]], %[[C]])
// AGAIN: scf.yield %[[M]]
// AGAIN-LABEL: func.func @main
// AGAIN-SAME: %{{[^:]+}}: tensor<16x8xf32> {relax.name = "multiply_0"}
// AGAIN-NOT: relax.permute_dims
// CHECK-LABEL: func.func @main_transform_params
// CHECK-SAME: -> tensor<16x8xf32>
func.func @main_transform_params(%w: tensor<16x8xf32> {relax.name = "w"}) -> tensor<8x16xf32> attributes {relax.function, relax.num_input = 0 : i64} {
  %t = "relax.permute_dims"(%w) {axes = [1, 0]} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}
func.func @main(%x: tensor<4x16xf32> {relax.name = "x"}, %wt: tensor<8x16xf32> {relax.name = "permute_dims_0"}) -> tensor<4x8xf32> attributes {relax.function, relax.num_input = 1 : i64, relax.transform_params = @main_transform_params} {
  %t2 = "relax.permute_dims"(%wt) {axes = [1, 0]} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %c = "relax.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %s = "relax.multiply"(%t2, %c) : (tensor<16x8xf32>, tensor<f32>) -> tensor<16x8xf32>
  %mm = "relax.matmul"(%x, %s) {out_dtype = "float32"} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %mm : tensor<4x8xf32>
}
