"""`relaxmlir.relax`: Relax graph IR, the BlockBuilder, build and the virtual machine."""

from relaxmlir.ir import Function, IRModule  # noqa: F401
from relaxmlir.relax import backend, dpl, op, transform  # noqa: F401
from relaxmlir.relax.block_builder import BlockBuilder  # noqa: F401
from relaxmlir.relax.expr import (  # noqa: F401
    Call,
    Constant,
    DataflowVar,
    Expr,
    ExternFunc,
    GlobalVar,
    Tuple,
    Var,
    call_dps_packed,
    call_packed,
    call_tir,
    const,
)
from relaxmlir.relax.pipeline import get_pipeline  # noqa: F401
from relaxmlir.relax.struct_info import StructInfo, TensorStructInfo, TupleStructInfo  # noqa: F401
from relaxmlir.runtime import Executable, VirtualMachine  # noqa: F401
from relaxmlir.relax.vm_build import BuildError, build  # noqa: F401,E402
