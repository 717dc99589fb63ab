"""`from relaxmlir import dlight as dl`: default schedules as a module pass (TVM's DLight).

    with rm.target.Target("cuda"):
        mod = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                      dl.gpu.GeneralReduction(), dl.gpu.Fallback())(mod)
    ex = relax.build(mod, "cuda")

A rule is a row of a schedule table (`lowering/gpu/schedule.RULES` for GPUs, the CPU table of
`lowering/schedule`); `ApplyDefaultSchedule` schedules every PrimFunc of the module with the first
of its rules that applies, in the order given, and leaves the others to `relax.build` (which
schedules what is still unscheduled with the full table).
"""

from relaxmlir.dlight import cpu, gpu  # noqa: F401
from relaxmlir.dlight.apply import ApplyDefaultSchedule  # noqa: F401
from relaxmlir.dlight.base import ScheduleRule  # noqa: F401
