# RUN: %PYTHON %s | FileCheck %s
"""A buffer updated in place imports as state: a parameter of main after the inputs, its new
value returned after the outputs, its value at export returned by main_initial_state."""

import torch
from torch import nn

from relaxmlir.frontend import from_exported_program


class RunningTotal(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x):
        self.total.add_(x)
        return self.total * 2


# CHECK: func.func @main(%[[X:.+]]: tensor<4xf32> {relax.name = "x"}, %[[T:.+]]: tensor<4xf32> {relax.name = "total"}) -> (tensor<4xf32>, tensor<4xf32>)
# CHECK-SAME: relax.state = {init = "main_initial_state", params = ["total"]}
# CHECK: %[[NEW:.+]] = "relax.add"(%[[T]], %[[X]])
# CHECK: %[[OUT:.+]] = "relax.multiply"(%[[NEW]],
# CHECK: scf.yield %[[OUT]], %[[NEW]]
# CHECK: func.func @main_initial_state() -> tensor<4xf32>
# CHECK-NEXT: "relax.constant"() {value = dense<0.000000e+00> : tensor<4xf32>}
ep = torch.export.export(RunningTotal(), (torch.ones(4),))
print(from_exported_program(ep))
