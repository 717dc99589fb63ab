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
