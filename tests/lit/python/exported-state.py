# RUN: %PYTHON %s | FileCheck %s
"""A buffer updated in place imports as state: a parameter of main after the inputs, its new
value returned after the outputs, its value at export returned by main_initial_state."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

import torch  # noqa: E402

from relaxmlir.frontend import from_exported_program  # noqa: E402

from test_frontend_exported_program import _RunningTotal  # noqa: E402

# CHECK: func.func @main(%[[X:.+]]: tensor<4xf32> {relax.name = "x"}, %[[T:.+]]: tensor<4xf32> {relax.name = "total"}) -> (tensor<4xf32>, tensor<4xf32>)
# CHECK-SAME: relax.state = {init = "main_initial_state", params = ["total"]}
# CHECK: %[[NEW:.+]] = "relax.add"(%[[T]], %[[X]])
# CHECK: %[[OUT:.+]] = "relax.multiply"(%[[NEW]],
# CHECK: scf.yield %[[OUT]], %[[NEW]]
# CHECK: func.func @main_initial_state() -> tensor<4xf32>
# CHECK-NEXT: "relax.constant"() {value = dense<0.000000e+00> : tensor<4xf32>}
ep = torch.export.export(_RunningTotal(), (torch.ones(4),))
print(from_exported_program(ep))
