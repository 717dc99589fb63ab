"""The torch -> relax rules, one module per op family; importing the package fills `CONVERTERS`."""

from relaxmlir.frontend.rules import (  # noqa: F401  (each module registers its rules)
    create,
    einsum,
    elementwise,
    linalg,
    nn,
    recurrent,
    reduction,
    resize,
    shape,
    slicing,
    sorting,
)
