# RUN: %PYTHON %s | FileCheck %s
"""Printed IR of BlockBuilder modules: the emit_te module and the MLP after BindParams."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from relaxmlir import relax, te  # noqa: E402

from mlp_models import mlp, params, te_relu  # noqa: E402


def run(f):
    print("TEST:", f.__name__)
    f()
    return f


# CHECK-LABEL: TEST: emit_te_module
# CHECK: func.func @main(%[[A:.+]]: tensor<16x32xf32> {relax.name = "A"}, %[[B:.+]]: tensor<32x8xf32> {relax.name = "B"}) -> tensor<16x8xf32> attributes {relax.function}
# CHECK: %[[GV:.+]] = scf.execute_region -> tensor<16x8xf32> no_inline {
# CHECK-NEXT: %[[MM:.+]] = "relax.call_tir"(%[[A]], %[[B]]) {callee = @te_matmul} : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
# CHECK-NEXT: %[[R:.+]] = "relax.call_tir"(%[[MM]]) {callee = @te_relu} : (tensor<16x8xf32>) -> tensor<16x8xf32>
# CHECK-NEXT: scf.yield %[[R]] : tensor<16x8xf32>
# CHECK-NEXT: } {relax.dataflow}
# CHECK-NEXT: return %[[GV]]
# CHECK: func.func private @te_matmul(%{{.+}}: tensor<16x32xf32>, %{{.+}}: tensor<32x8xf32>, %{{.+}}: tensor<16x8xf32>) -> tensor<16x8xf32> attributes {relax.prim_func}
# CHECK: linalg.fill
# CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
# CHECK: func.func private @te_relu
# CHECK: arith.maximumf
@run
def emit_te_module():
    def te_matmul(A, B):
        k = te.reduce_axis((0, A.shape[1]), name="k")
        return te.compute((A.shape[0], B.shape[1]), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k))

    A = relax.Var("A", relax.TensorStructInfo((16, 32), "float32"))
    B = relax.Var("B", relax.TensorStructInfo((32, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [A, B]):
        with bb.dataflow():
            C = bb.emit_te(te_matmul, A, B)
            D = bb.emit_output(bb.emit_te(te_relu, C))
        bb.emit_func_output(D)
    bb.get().show()


# CHECK-LABEL: TEST: bound_mlp
# CHECK: func.func @main(%[[X:.+]]: tensor<1x784xf32> {relax.name = "x"}) -> tensor<1x10xf32>
# CHECK-DAG: %[[W0:.+]] = "relax.constant"() {value = dense_resource<__elided__> : tensor<128x784xf32>}
# CHECK-DAG: %[[B0:.+]] = "relax.constant"() {value = dense_resource<__elided__> : tensor<128xf32>}
# CHECK: "relax.call_tir"(%[[X]], %[[W0]], %[[B0]]) {callee = @te_linear}
# CHECK: "relax.call_tir"({{.*}}) {callee = @te_relu}
# CHECK: "relax.call_tir"({{.*}}) {callee = @te_linear1}
# CHECK-NOT: relax.name = "w0"
@run
def bound_mlp():
    relax.transform.BindParams("main", params())(mlp("tir")).show()


# CHECK-LABEL: TEST: packed_mlp
# CHECK: "relax.call_dps_packed"(%{{.+}}, %{{.+}}, %{{.+}}) {callee = "env.linear"} : (tensor<1x784xf32>, tensor<128x784xf32>, tensor<128xf32>) -> tensor<1x128xf32>
# CHECK: "relax.call_dps_packed"(%{{.+}}) {callee = "env.relu"}
@run
def packed_mlp():
    mlp("packed").show()
