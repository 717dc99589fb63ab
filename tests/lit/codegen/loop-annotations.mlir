// RUN: relaxmlir-opt %s --convert-scf-to-cf --convert-to-llvm --reconcile-unrealized-casts | FileCheck %s

// A loop a schedule marked "do not unroll" (Script.keep_rolled puts `loop_annotation` on the
// scf.for). convert-scf-to-cf hands the mark to the loop's latch branch and convert-to-llvm
// copies it into the LLVM branch's own `loop_annotation`, which the translation to LLVM IR makes
// !llvm.loop metadata with llvm.loop.unroll.disable (test_schedule checks the LLVM IR). Under
// the dialect-prefixed name `llvm.loop_annotation` it would stay a discardable attribute that
// the translation does not read.

// CHECK: #[[$UNROLL:.+]] = #llvm.loop_unroll<disable = true>
// CHECK: #[[$ROLLED:.+]] = #llvm.loop_annotation<unroll = #[[$UNROLL]]>
// CHECK-LABEL: llvm.func @copy
// CHECK: llvm.cond_br
// CHECK: llvm.br ^{{.*}} {loop_annotation = #[[$ROLLED]]}
// CHECK-NOT: llvm.loop_annotation =
// An unmarked loop keeps a plain latch.
// CHECK-LABEL: llvm.func @plain
// CHECK-NOT: loop_annotation
// CHECK: llvm.return

func.func @copy(%a: memref<7xf32>, %b: memref<7xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  scf.for %i = %c0 to %c7 step %c1 {
    %v = memref.load %a[%i] : memref<7xf32>
    memref.store %v, %b[%i] : memref<7xf32>
  } {loop_annotation = #llvm.loop_annotation<unroll = <disable = true>>}
  return
}

func.func @plain(%a: memref<7xf32>, %b: memref<7xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  scf.for %i = %c0 to %c7 step %c1 {
    %v = memref.load %a[%i] : memref<7xf32>
    memref.store %v, %b[%i] : memref<7xf32>
  }
  return
}
