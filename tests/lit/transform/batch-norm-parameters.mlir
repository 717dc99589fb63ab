// RUN: relaxmlir-opt %s --relax-fold-batch-norm | FileCheck %s
// RUN: relaxmlir-opt %s --relax-fold-batch-norm --relax-lift-transform-params | FileCheck %s --check-prefix=LIFT

// A BatchNorm1d after a linear layer, its statistics parameters (num_input = 1): no conv to fold
// into, so it becomes x * s + shift per channel, with s = gamma * rsqrt(var + eps) and
// shift = (-mean) * s + beta as relax ops on the parameters (the constant case computes both at
// compile time).
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[^:]+]]: tensor<3x24xf32> {{[^,]+}}, %[[G:[^:]+]]: tensor<24xf32> {{[^,]+}}, %[[BETA:[^:]+]]: tensor<24xf32> {{[^,]+}}, %[[MEAN:[^:]+]]: tensor<24xf32> {{[^,]+}}, %[[VAR:[^:]+]]: tensor<24xf32> {{[^,]+}})
// CHECK-NOT: relax.nn_batch_norm
// CHECK: %[[VE:.+]] = "relax.add"(%[[VAR]], %{{.+}})
// CHECK: %[[INV:.+]] = "relax.rsqrt"(%[[VE]])
// CHECK: %[[S:.+]] = "relax.multiply"(%[[G]], %[[INV]])
// CHECK: %[[NM:.+]] = "relax.negative"(%[[MEAN]])
// CHECK: %[[SH:.+]] = "relax.multiply"(%[[NM]], %[[S]])
// CHECK: %[[SB:.+]] = "relax.add"(%[[SH]], %[[BETA]])
// CHECK: %[[S2:.+]] = "relax.reshape"(%[[S]]) {shape = [1, 24]}
// CHECK: %[[SB2:.+]] = "relax.reshape"(%[[SB]]) {shape = [1, 24]}
// CHECK: %[[M:.+]] = "relax.multiply"(%[[X]], %[[S2]]) : (tensor<3x24xf32>, tensor<1x24xf32>) -> tensor<3x24xf32>
// CHECK: "relax.add"(%[[M]], %[[SB2]]) : (tensor<3x24xf32>, tensor<1x24xf32>) -> tensor<3x24xf32>

// Lifted: main only multiplies and adds.
// LIFT-LABEL: func.func @main_transform_params
// LIFT: relax.rsqrt
// LIFT-LABEL: func.func @main
// LIFT-SAME: (%[[X:[^:]+]]: tensor<3x24xf32> {relax.name = "x"}, %[[S:[^:]+]]: tensor<1x24xf32> {{[^,]+}}, %[[SB:[^:]+]]: tensor<1x24xf32> {{[^)]+}})
// LIFT-NEXT: %[[M:.+]] = "relax.multiply"(%[[X]], %[[S]])
// LIFT-NEXT: %[[A:.+]] = "relax.add"(%[[M]], %[[SB]])
// LIFT-NEXT: return %[[A]]
func.func @main(%x: tensor<3x24xf32> {relax.name = "x"}, %gamma: tensor<24xf32> {relax.name = "bn.weight"}, %beta: tensor<24xf32> {relax.name = "bn.bias"}, %mean: tensor<24xf32> {relax.name = "bn.running_mean"}, %var: tensor<24xf32> {relax.name = "bn.running_var"}) -> tensor<3x24xf32> attributes {relax.function, relax.num_input = 1 : i64} {
  %bn = "relax.nn_batch_norm"(%x, %gamma, %beta, %mean, %var) {axis = 1 : i64, center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<3x24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<3x24xf32>
  return %bn : tensor<3x24xf32>
}
