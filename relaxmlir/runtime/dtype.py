"""Element types by name ("float32", "bfloat16", "bool", ...) and their numpy dtypes.

numpy has no bfloat16: the `ml_dtypes` package supplies it, imported only when a bfloat16 array
is made.
"""

from __future__ import annotations

import numpy as np

_NATIVE = {
    "bool": np.bool_,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "float16": np.float16,
    "float32": np.float32,
    "float64": np.float64,
}
DTYPES = tuple(_NATIVE) + ("bfloat16",)


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype of a relax dtype name; TypeError on names the runtime does not know."""
    if name in _NATIVE:
        return np.dtype(_NATIVE[name])
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError("bfloat16 arrays need the ml_dtypes package (pip install ml_dtypes)") from None
        return np.dtype(ml_dtypes.bfloat16)
    raise TypeError(f"unsupported dtype '{name}'; supported: {', '.join(DTYPES)}")


def dtype_name(dtype: np.dtype) -> str:
    """The relax name of a numpy dtype, or TypeError (object, str, complex, ... arrays)."""
    dtype = np.dtype(dtype)
    if dtype.name in _NATIVE:
        return dtype.name
    if dtype.name == "bfloat16":
        return "bfloat16"
    raise TypeError(
        f"arrays of dtype {dtype} are not supported; supported dtypes: {', '.join(DTYPES)}"
    )
