// RUN: relaxmlir-opt %s --mlir-elide-elementsattrs-if-larger=2 | FileCheck %s --check-prefix=ELIDE
// RUN: relaxmlir-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: relaxmlir-opt %s --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC
// RUN: relaxmlir-opt %s --relax-verify --mlir-timing --mlir-disable-threading 2>&1 >/dev/null \
// RUN:   | FileCheck %s --check-prefix=TIMING
// RUN: echo '"test.unregistered"() : () -> ()' \
// RUN:   | relaxmlir-opt - --allow-unregistered-dialect --dump-pass-pipeline --canonicalize 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PIPELINE

// ELIDE-LABEL: func.func @weights
// ELIDE: "relax.constant"() {value = dense_resource<__elided__> : tensor<4xf32>}
// ELIDE: "relax.constant"() {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}
// GENERIC: "func.func"() <{function_type = () -> (tensor<4xf32>, tensor<2xf32>), sym_name = "weights"}>
// GENERIC: "func.return"
// LOC: "relax.constant"() {{.*}} loc(#[[LOC:.+]])
// LOC: #[[LOC]] = loc("{{.*}}opt-printing.mlir":[[@LINE+6]]:8)
// TIMING: Execution time report
// TIMING: relax-verify
// PIPELINE: builtin.module(canonicalize{
// PIPELINE: "test.unregistered"() : () -> ()
func.func @weights() -> (tensor<4xf32>, tensor<2xf32>) attributes {relax.function} {
  %0 = "relax.constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %1 = "relax.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  return %0, %1 : tensor<4xf32>, tensor<2xf32>
}
