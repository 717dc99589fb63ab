// RUN: relaxmlir-opt %s -split-input-file -verify-diagnostics --relax-verify

// IRDL constraints, checked when the module is parsed.

func.func @call_tir_callee_not_a_symbol(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected base attribute 'builtin.symbol_ref' but got 'builtin.string'}}
  %0 = "relax.call_tir"(%x) {callee = "add"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @call_tir_missing_callee(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'relax.call_tir' op attribute "callee" is expected but not provided}}
  %0 = "relax.call_tir"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @unknown_relax_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unregistered operation 'relax.frobnicate' found in dialect ('relax')}}
  %0 = "relax.frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @call_packed_on_memref(%x: memref<4xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  "relax.call_packed"(%x) {callee = "env.f"} : (memref<4xf32>) -> ()
  return
}

// -----

// Semantic checks of the relax-verify pass.

func.func @call_tir_callee_missing(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'relax.call_tir' op callee @nowhere not found in the module}}
  %0 = "relax.call_tir"(%x) {callee = @nowhere} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func private @add(%a: tensor<4xf32>, %b: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%out : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @call_tir_wrong_arity(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'relax.call_tir' op callee @add takes 3 arguments, expected (2): 1 inputs + 1 outputs}}
  %0 = "relax.call_tir"(%x) {callee = @add} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func private @add(%a: tensor<4xf32>, %b: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%out : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @call_tir_wrong_type(%x: tensor<4xf32>, %y: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'relax.call_tir' op argument #1 of @add has type (tensor<4xf32>), got (tensor<4xi32>)}}
  %0 = "relax.call_tir"(%x, %y) {callee = @add} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @alloc_in_dataflow() -> tensor<4xf32> attributes {relax.function} {
  %0 = scf.execute_region -> tensor<4xf32> no_inline {
    // expected-error @+1 {{'relax.builtin_alloc_tensor' op is side-effecting and not allowed inside a dataflow block}}
    %1 = "relax.builtin_alloc_tensor"() : () -> tensor<4xf32>
    scf.yield %1 : tensor<4xf32>
  } {relax.dataflow}
  return %0 : tensor<4xf32>
}

// -----

func.func @call_packed_in_dataflow(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0 = scf.execute_region -> tensor<4xf32> no_inline {
    // expected-error @+1 {{'relax.call_packed' op is side-effecting and not allowed inside a dataflow block}}
    "relax.call_packed"(%x) {callee = "env.print"} : (tensor<4xf32>) -> ()
    scf.yield %x : tensor<4xf32>
  } {relax.dataflow}
  return %0 : tensor<4xf32>
}

// -----

func.func @packed_empty_name(%x: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.call_dps_packed' op expects a non-empty packed function name}}
  %0 = "relax.call_dps_packed"(%x) {callee = ""} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @constant_type_mismatch() -> tensor<2xf32> attributes {relax.function} {
  // expected-error @+1 {{'relax.constant' op value type (tensor<3xf32>) does not match result type (tensor<2xf32>)}}
  %0 = "relax.constant"() {value = dense<1.0> : tensor<3xf32>} : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Every high-level op: a malformed instance (missing or ill-typed attribute, wrong operand or
// result count, non-tensor operand) is rejected by its IRDL constraints when parsed.

func.func @abs_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.abs"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @negative_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.negative"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @exp_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.exp"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @log_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.log"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @sqrt_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.sqrt"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @rsqrt_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.rsqrt"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @sigmoid_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.sigmoid"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @tanh_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.tanh"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @erf_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.erf"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @sin_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.sin"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @cos_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.cos"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @floor_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.floor"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @ceil_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.ceil"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @round_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.round"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @trunc_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.trunc"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @log1p_of_integers(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{'relax.log1p' op is invalid: relax.log1p: expected a float tensor for 'x', got (int32)}}
  %0 = "relax.log1p"(%x) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @expm1_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.expm1"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @log2_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.log2"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @log10_wrong_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.log10' op result #0 is declared tensor<3x2xf32>, but its operands give tensor<2x3xf32>}}
  %0 = "relax.log10"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @tan_of_integers(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{'relax.tan' op is invalid: relax.tan: expected a float tensor for 'x', got (int32)}}
  %0 = "relax.tan"(%x) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @asin_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.asin"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @acos_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.acos"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @atan_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.atan"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @sinh_of_integers(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{'relax.sinh' op is invalid: relax.sinh: expected a float tensor for 'x', got (int32)}}
  %0 = "relax.sinh"(%x) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @cosh_wrong_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.cosh' op result #0 is declared tensor<3x2xf32>, but its operands give tensor<2x3xf32>}}
  %0 = "relax.cosh"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @asinh_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.asinh"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @acosh_of_integers(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{'relax.acosh' op is invalid: relax.acosh: expected a float tensor for 'x', got (int32)}}
  %0 = "relax.acosh"(%x) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @atanh_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.atanh"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @exp2_of_integers(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{'relax.exp2' op is invalid: relax.exp2: expected a float tensor for 'x', got (int32)}}
  %0 = "relax.exp2"(%x) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @isnan_float_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.isnan' op result #0 is declared tensor<2x3xf32>, but its operands give tensor<2x3xi8>}}
  %0 = "relax.isnan"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @isinf_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.isinf"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  return
}

// -----

func.func @isfinite_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.isfinite"(%x) : (memref<2x3xf32>) -> tensor<2x3xi8>
  return
}

// -----

func.func @sign_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.sign"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @square_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.square"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @nn_relu_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.nn_relu"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @nn_gelu_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.nn_gelu"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @nn_gelu_tanh_two_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "relax.nn_gelu_tanh"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @nn_silu_on_memref(%x: memref<2x3xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %0 = "relax.nn_silu"(%x) : (memref<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @flatten_two_results(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %0:2 = "relax.flatten"(%x) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @logical_not_no_operand() {
  // expected-error @+1 {{op expects exactly 1 operands, but got 0}}
  %0 = "relax.logical_not"() : () -> tensor<2x3xi8>
  return
}

// -----

func.func @leaky_relu_integer_alpha(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.float' but got 'builtin.integer'}}
  %0 = "relax.nn_leaky_relu"(%x) {alpha = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @clip_missing_max(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.clip' op attribute "max" is expected but not provided}}
  %0 = "relax.clip"(%x) {min = 0.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @astype_type_dtype(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.string' but got 'builtin.type'}}
  %0 = "relax.astype"(%x) {dtype = i32} : (tensor<2x3xf32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @softmax_string_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.string'}}
  %0 = "relax.nn_softmax"(%x) {axis = "last"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @log_softmax_missing_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.nn_log_softmax' op attribute "axis" is expected but not provided}}
  %0 = "relax.nn_log_softmax"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @dropout_integer_rate(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.float' but got 'builtin.integer'}}
  %0 = "relax.nn_dropout"(%x) {rate = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @add_one_operand(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.add"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @subtract_three_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.subtract"(%x, %x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @multiply_one_operand(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.multiply"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @divide_three_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.divide"(%x, %x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @floor_divide_one_operand(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.floor_divide"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @floor_mod_three_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.floor_mod"(%x, %x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @power_one_operand(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.power"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @mod_mixed_dtypes(%x: tensor<2x3xf32>, %i: tensor<2x3xi32>) {
  // expected-error @+1 {{'relax.mod' op is invalid: relax.mod: operands must have the same dtype, got (float32, int32); insert relax.op.astype}}
  %0 = "relax.mod"(%x, %i) : (tensor<2x3xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @atan2_of_integers(%i: tensor<2x3xi32>) {
  // expected-error @+1 {{'relax.atan2' op is invalid: relax.atan2: expected a float tensor for 'lhs', got (int32)}}
  %0 = "relax.atan2"(%i, %i) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @hypot_one_operand(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.hypot"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @copysign_three_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.copysign"(%x, %x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @maximum_three_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.maximum"(%x, %x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @minimum_one_operand(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.minimum"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @equal_three_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.equal"(%x, %x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  return
}

// -----

func.func @not_equal_one_operand(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.not_equal"(%x) : (tensor<2x3xf32>) -> tensor<2x3xi8>
  return
}

// -----

func.func @less_three_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.less"(%x, %x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  return
}

// -----

func.func @less_equal_one_operand(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.less_equal"(%x) : (tensor<2x3xf32>) -> tensor<2x3xi8>
  return
}

// -----

func.func @greater_three_operands(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.greater"(%x, %x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  return
}

// -----

func.func @greater_equal_one_operand(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.greater_equal"(%x) : (tensor<2x3xf32>) -> tensor<2x3xi8>
  return
}

// -----

func.func @logical_and_three_operands(%x: tensor<2x3xi8>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.logical_and"(%x, %x, %x) : (tensor<2x3xi8>, tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
  return
}

// -----

func.func @logical_or_one_operand(%x: tensor<2x3xi8>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.logical_or"(%x) : (tensor<2x3xi8>) -> tensor<2x3xi8>
  return
}

// -----

func.func @logical_xor_of_floats(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.logical_xor' op is invalid: relax.logical_xor: expected bool tensors, got (float32)}}
  %0 = "relax.logical_xor"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi8>
  return
}

// -----

func.func @where_two_operands(%c: tensor<2x3xi8>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{op expects exactly 3 operands, but got 2}}
  %0 = "relax.where"(%c, %x) : (tensor<2x3xi8>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @matmul_missing_out_dtype(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) {
  // expected-error @+1 {{'relax.matmul' op attribute "out_dtype" is expected but not provided}}
  %0 = "relax.matmul"(%x, %w) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @permute_dims_integer_axes(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.integer'}}
  %0 = "relax.permute_dims"(%x) {axes = 1 : i64} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @layout_transform_channels_not_blocked(%x: tensor<1x24x4x4xf32>) {
  // expected-error @+1 {{relax.layout_transform: layout NCHW16c: channels (24) do not divide into blocks of 16}}
  %0 = "relax.layout_transform"(%x) {src_layout = "NCHW", dst_layout = "NCHW16c"} : (tensor<1x24x4x4xf32>) -> tensor<1x2x4x4x16xf32>
  return
}

// -----

func.func @reshape_missing_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.reshape' op attribute "shape" is expected but not provided}}
  %0 = "relax.reshape"(%x) : (tensor<2x3xf32>) -> tensor<6xf32>
  return
}

// -----

func.func @squeeze_integer_axis(%x: tensor<2x1xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.integer'}}
  %0 = "relax.squeeze"(%x) {axis = 1 : i64} : (tensor<2x1xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @expand_dims_missing_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.expand_dims' op attribute "axis" is expected but not provided}}
  %0 = "relax.expand_dims"(%x) : (tensor<2x3xf32>) -> tensor<1x2x3xf32>
  return
}

// -----

func.func @broadcast_to_string_shape(%x: tensor<3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.string'}}
  %0 = "relax.broadcast_to"(%x) {shape = "2x3"} : (tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @tile_missing_repeats(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.tile' op attribute "repeats" is expected but not provided}}
  %0 = "relax.tile"(%x) : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_missing_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.concat' op attribute "axis" is expected but not provided}}
  %0 = "relax.concat"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @split_integer_indices(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.integer'}}
  %0:2 = "relax.split"(%x) {axis = 1 : i64, indices = 1 : i64} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @take_missing_mode(%x: tensor<2x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{'relax.take' op attribute "mode" is expected but not provided}}
  %0 = "relax.take"(%x, %i) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  return
}

// -----

func.func @strided_slice_missing_strides(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.strided_slice' op attribute "strides" is expected but not provided}}
  %0 = "relax.strided_slice"(%x) {axes = [1], begin = [0], end = [2]} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @sum_integer_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.integer'}}
  %0 = "relax.sum"(%x) {axis = 1 : i64, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @mean_missing_keepdims(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.mean' op attribute "keepdims" is expected but not provided}}
  %0 = "relax.mean"(%x) {axis = [1]} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @max_integer_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.integer'}}
  %0 = "relax.max"(%x) {axis = 1 : i64, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @min_missing_keepdims(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.min' op attribute "keepdims" is expected but not provided}}
  %0 = "relax.min"(%x) {axis = [1]} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @prod_integer_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.integer'}}
  %0 = "relax.prod"(%x) {axis = 1 : i64, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @variance_missing_keepdims(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.variance' op attribute "keepdims" is expected but not provided}}
  %0 = "relax.variance"(%x) {axis = [1]} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @argmax_integer_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.integer'}}
  %0 = "relax.argmax"(%x) {axis = 1 : i64, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xi64>
  return
}

// -----

func.func @argmin_missing_keepdims(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.argmin' op attribute "keepdims" is expected but not provided}}
  %0 = "relax.argmin"(%x) {axis = [1]} : (tensor<2x3xf32>) -> tensor<2xi64>
  return
}

// -----

func.func @full_no_fill_value() {
  // expected-error @+1 {{op expects exactly 1 operands, but got 0}}
  %0 = "relax.full"() {dtype = "float32", shape = [2, 3]} : () -> tensor<2x3xf32>
  return
}

// -----

func.func @full_like_missing_dtype(%x: tensor<2x3xf32>, %v: tensor<f32>) {
  // expected-error @+1 {{'relax.full_like' op attribute "dtype" is expected but not provided}}
  %0 = "relax.full_like"(%x, %v) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @zeros_missing_shape() {
  // expected-error @+1 {{'relax.zeros' op attribute "shape" is expected but not provided}}
  %0 = "relax.zeros"() {dtype = "float32"} : () -> tensor<2x3xf32>
  return
}

// -----

func.func @ones_integer_dtype() {
  // expected-error @+1 {{expected base attribute 'builtin.string' but got 'builtin.integer'}}
  %0 = "relax.ones"() {dtype = 32 : i64, shape = [2, 3]} : () -> tensor<2x3xf32>
  return
}

// -----

func.func @arange_missing_step() {
  // expected-error @+1 {{'relax.arange' op attribute "step" is expected but not provided}}
  %0 = "relax.arange"() {dtype = "int64", end = 6 : i64, start = 0 : i64} : () -> tensor<6xi64>
  return
}

// -----

func.func @tril_float_k(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.float'}}
  %0 = "relax.tril"(%x) {k = 0.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @triu_missing_k(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.triu' op attribute "k" is expected but not provided}}
  %0 = "relax.triu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @conv2d_string_groups(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.string'}}
  %0 = "relax.nn_conv2d"(%x, %w) {data_layout = "NCHW", dilation = [1, 1], groups = "1", kernel_layout = "OIHW", out_dtype = "float32", padding = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  return
}

// -----

func.func @max_pool2d_missing_layout(%x: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'relax.nn_max_pool2d' op attribute "layout" is expected but not provided}}
  %0 = "relax.nn_max_pool2d"(%x) {ceil_mode = false, count_include_pad = false, dilation = [1, 1], padding = [0, 0, 0, 0], pool_size = [2, 2], strides = [2, 2]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  return
}

// -----

func.func @avg_pool2d_integer_pool_size(%x: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.array' but got 'builtin.integer'}}
  %0 = "relax.nn_avg_pool2d"(%x) {ceil_mode = false, count_include_pad = false, dilation = [1, 1], layout = "NCHW", padding = [0, 0, 0, 0], pool_size = 2 : i64, strides = [2, 2]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  return
}

// -----

func.func @adaptive_avg_pool2d_missing_output_size(%x: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'relax.nn_adaptive_avg_pool2d' op attribute "output_size" is expected but not provided}}
  %0 = "relax.nn_adaptive_avg_pool2d"(%x) {layout = "NCHW"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x1x1xf32>
  return
}

// -----

func.func @layer_norm_integer_epsilon(%x: tensor<2x3xf32>, %g: tensor<3xf32>) {
  // expected-error @+1 {{expected base attribute 'builtin.float' but got 'builtin.integer'}}
  %0 = "relax.nn_layer_norm"(%x, %g, %g) {axes = [1], center = true, epsilon = 0 : i64, scale = true} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @batch_norm_four_operands(%x: tensor<1x2x4x4xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{op expects exactly 5 operands, but got 4}}
  %0 = "relax.nn_batch_norm"(%x, %c, %c, %c) {axis = 1 : i64, center = true, epsilon = 1.000000e-05 : f64, scale = true} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  return
}

// -----

// Attribute kinds that IRDL's base constraints cannot tell apart are checked by relax-verify.
func.func @keepdims_not_bool(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'relax.sum' op attribute 'keepdims' expects a bool (true/false)}}
  %0 = "relax.sum"(%x) {axis = [1], keepdims = 7 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @axis_not_integers(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'relax.sum' op attribute 'axis' expects an array of integers}}
  %0 = "relax.sum"(%x) {axis = ["a"], keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @empty_concat() -> tensor<0xf32> {
  // expected-error @+1 {{'relax.concat' op expects at least one tensor}}
  %0 = "relax.concat"() {axis = 0 : i64} : () -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

func.func @pad_reflect_wider_than_the_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.nn_pad' op is invalid: relax.nn.pad: reflect padding (2, 0) of an axis of size (2) is too large}}
  %0 = "relax.nn_pad"(%x) {pad_mode = "reflect", pad_value = 0.000000e+00 : f64, pad_width = [2, 0, 0, 0]} : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @pad_missing_mode(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.nn_pad' op attribute "pad_mode" is expected but not provided}}
  %0 = "relax.nn_pad"(%x) {pad_value = 0.000000e+00 : f64, pad_width = [0, 0, 0, 0]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @cumsum_missing_dtype(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.cumsum' op attribute "dtype" is expected but not provided}}
  %0 = "relax.cumsum"(%x) {axis = 1 : i64, exclusive = false} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @argsort_float_indices(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'relax.argsort' op is invalid: relax.argsort: expected an integer index dtype, got (float32)}}
  %0 = "relax.argsort"(%x) {axis = 0 : i64, descending = false, dtype = "float32"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_elements_rank_mismatch(%x: tensor<2x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{'relax.gather_elements' op is invalid: relax.gather_elements: indices have rank (1), data has rank (2)}}
  %0 = "relax.gather_elements"(%x, %i) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @scatter_elements_unknown_reduction(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>, %u: tensor<2x2xf32>) {
  // expected-error @+1 {{'relax.scatter_elements' op is invalid: relax.scatter_elements: unknown reduction 'mul'; reductions: update, add}}
  %0 = "relax.scatter_elements"(%x, %i, %u) {axis = 1 : i64, reduction = "mul"} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @bitwise_and_three_operands(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.bitwise_and"(%x, %x, %x) : (tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @bitwise_or_one_operand(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "relax.bitwise_or"(%x) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @bitwise_xor_three_operands(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{op expects exactly 2 operands, but got 3}}
  %0 = "relax.bitwise_xor"(%x, %x, %x) : (tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @bitwise_not_no_operand() {
  // expected-error @+1 {{op expects exactly 1 operands, but got 0}}
  %0 = "relax.bitwise_not"() : () -> tensor<2x3xi32>
  return
}

// -----

func.func @index_copy_source_shape(%c: tensor<1x4x2xf32>, %p: tensor<1xi64>, %r: tensor<1x2x2xf32>) {
  // expected-error @+1 {{'relax.index_copy' op is invalid: relax.index_copy: source has shape [1, 2, 2], expected [1, 1, 2]}}
  %0 = "relax.index_copy"(%c, %p, %r) {axis = 1 : i64} : (tensor<1x4x2xf32>, tensor<1xi64>, tensor<1x2x2xf32>) -> tensor<1x4x2xf32>
  return
}

// -----

func.func private @write_rows(%p: tensor<1xi64>, %c: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  return %c : tensor<4xf32>
}

func.func @call_tir_inplace_result_type(%p: tensor<1xi64>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'relax.call_tir_inplace' op result #0 (tensor<4xi32>) is written into an operand of type (tensor<4xf32>)}}
  %0 = "relax.call_tir_inplace"(%p, %c) {callee = @write_rows} : (tensor<1xi64>, tensor<4xf32>) -> tensor<4xi32>
  return
}
