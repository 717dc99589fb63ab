"""PyTorch importers: `from_fx` (torch.fx) and `from_exported_program` (torch.export)."""

from relaxmlir.frontend.exported_program import from_exported_program  # noqa: F401
from relaxmlir.frontend.fx import from_fx  # noqa: F401
