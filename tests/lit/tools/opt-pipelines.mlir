// Project and upstream passes mix in one pipeline, given as a pipeline string, as per-pass
// flags (run in flag order) or by pipeline name; the IR dump names each stage.
// RUN: relaxmlir-opt %s --pass-pipeline='builtin.module(relax-verify,relax-inline-dataflow,canonicalize)' | FileCheck %s
// RUN: relaxmlir-opt %s --relax-verify --relax-inline-dataflow --canonicalize | FileCheck %s
// RUN: relaxmlir-opt %s --pipeline=graph-lowering | FileCheck %s
// RUN: cat %s | relaxmlir-opt - -relax-inline-dataflow -o %t && FileCheck %s < %t
// RUN: relaxmlir-opt %s --relax-inline-dataflow --cse --mlir-print-ir-after-all 2>&1 >/dev/null \
// RUN:   | FileCheck %s --check-prefix=DUMP
// RUN: relaxmlir-opt --list-passes | FileCheck %s --check-prefix=LIST

func.func private @add(%a: tensor<4xf32>, %b: tensor<4xf32>, %out: tensor<4xf32>) -> tensor<4xf32> attributes {relax.prim_func} {
  %0 = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%out : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[Y:.+]]: tensor<4xf32>)
// CHECK-NOT: scf.execute_region
// CHECK: %[[SUM:.+]] = "relax.call_tir"(%[[X]], %[[Y]]) {callee = @add}
// CHECK-NEXT: return %[[SUM]]
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> attributes {relax.function} {
  %0 = scf.execute_region -> tensor<4xf32> no_inline {
    %1 = "relax.call_tir"(%x, %y) {callee = @add} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %1 : tensor<4xf32>
  } {relax.dataflow}
  return %0 : tensor<4xf32>
}

// DUMP: // -----// IR Dump After relax-inline-dataflow (relax-inline-dataflow) //----- //
// DUMP-NOT: scf.execute_region
// DUMP: // -----// IR Dump After CSE (cse) //----- //

// LIST: Project passes
// LIST-DAG: relax-verify check relax ops
// LIST-DAG: relax-inline-dataflow move the ops of dataflow blocks
// LIST: Named pipelines
// LIST: graph-lowering relax-verify,{{.*}}relax-inline-dataflow
