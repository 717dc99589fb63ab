# RUN: %PYTHON %s | FileCheck %s
"""Relax ops built from Python with the op classes of dialects/relax.py print as expected."""

import numpy as np
from mlir import ir

import dialects
from dialects import relax as rx


def run(f):
    print(f"\nTEST: {f.__name__}")
    with dialects.get_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            f()
        assert module.operation.verify()
        print(module)
    return f


def tensor(*shape):
    return ir.RankedTensorType.get(list(shape), ir.F32Type.get())


def function(name, inputs, results):
    from mlir.dialects import func

    op = func.FuncOp(name, ir.FunctionType.get(inputs, results))
    op.attributes[rx.FUNCTION_ATTR] = ir.UnitAttr.get()
    return op, op.add_entry_block()


# CHECK-LABEL: TEST: call_tir_heterogeneous_operands
# Operands of different types fill the variadic group's slots in order.
# CHECK: "relax.call_tir"(%[[X:.+]], %[[W:.+]]) {callee = @matmul, operandSegmentSizes = array<i32: 1, 1, 0,
# CHECK-SAME: : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
@run
def call_tir_heterogeneous_operands():
    from mlir.dialects import func

    _, block = function("main", [tensor(2, 8), tensor(8, 3)], [])
    with ir.InsertionPoint(block):
        rx.CallTIR.create(
            list(block.arguments), [tensor(2, 3)], {"callee": ir.FlatSymbolRefAttr.get("matmul")}
        )
        func.ReturnOp([])


# CHECK-LABEL: TEST: constant_and_alloc
# CHECK: "relax.constant"() {value = dense<[0.000000e+00, 1.000000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
# CHECK: "relax.builtin_alloc_tensor"() : () -> tensor<2xf32>
@run
def constant_and_alloc():
    from mlir.dialects import func

    _, block = function("main", [], [])
    with ir.InsertionPoint(block):
        value = ir.DenseElementsAttr.get(np.arange(2, dtype=np.float32))
        rx.Constant.create([], [tensor(2)], {"value": value})
        rx.AllocTensor.create([], [tensor(2)])
        func.ReturnOp([])
