"""Legalization rules of every high-level relax op; importing the package fills the registry."""

from relaxmlir.relax.transform.legalize_ops import (  # noqa: F401
    binary,
    create,
    index,
    linear_algebra,
    manipulate,
    nn,
    search,
    statistical,
    unary,
)
from relaxmlir.relax.transform.legalize_ops.common import (  # noqa: F401
    LEGALIZE_RULES,
    LegalizeRule,
    register_legalize,
)
