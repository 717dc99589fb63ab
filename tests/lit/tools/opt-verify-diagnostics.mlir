// RUN: split-file --leading-lines %s %t
// RUN: relaxmlir-opt %t/valid.mlir -split-input-file -verify-diagnostics
// RUN: not relaxmlir-opt %t/mismatch.mlir -verify-diagnostics --relax-verify 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MISMATCH

// Designators as in mlir-opt: @+N / @-N / @above / @below / same line, `-re` patterns, and
// notes. split-file keeps the line numbers of this file.

//--- valid.mlir
func.func @offsets() {
  // expected-error @+2 {{redefinition of SSA value '%v'}}
  %v = arith.constant 1 : i32
  %v = arith.constant 2 : i32
  // expected-note @-2 {{previously defined here}}
  return
}

// -----

func.func @above_and_below() {
  %v = arith.constant 1 : i32
  // expected-note @above {{previously defined here}}
  // expected-error-re @below {{redefinition of SSA value '{{%[a-z]+}}'}}
  %v = arith.constant 2 : i32
  return
}

// -----

func.func @same_line(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "relax.nope"(%x) : (tensor<4xf32>) -> tensor<4xf32> // expected-error {{unregistered operation 'relax.nope'}}
  return %0 : tensor<4xf32>
}

//--- mismatch.mlir
// An error nobody expected, and an expected error that never comes, both fail the run.
// MISMATCH: mismatch.mlir:[[@LINE+3]]:8: error: unexpected error: 'relax.call_tir' op callee @gone not found in the module
// MISMATCH: mismatch.mlir:[[@LINE+3]]: error: expected error "never produced" was not produced
func.func @mismatch(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "relax.call_tir"(%x) {callee = @gone} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{never produced}}
  return %0 : tensor<4xf32>
}
