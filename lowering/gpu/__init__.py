"""The CUDA target: GPU schedules, mapping to blocks and threads, host code and PTX (`pipelines.py`
row "cuda"). Importing the package registers its passes."""

from lowering.gpu import contract, passes, rows, schedule, transpose  # noqa: F401
