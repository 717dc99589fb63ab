"""Devices: where an NDArray lives and where an executable runs (`rm.cpu()`, `rm.cuda(0)`)."""

from __future__ import annotations

from dataclasses import dataclass

# DLPack device type codes (dlpack.h: kDLCPU, kDLCUDA).
DLPACK_CODES = {"cpu": 1, "cuda": 2}
# The device each target kind runs on.
TARGET_DEVICE = {"llvm": "cpu", "c": "cpu", "cuda": "cuda"}


@dataclass(frozen=True)
class Device:
    device_type: str = "cpu"
    device_id: int = 0

    def __post_init__(self):
        if self.device_type not in DLPACK_CODES:
            known = ", ".join(DLPACK_CODES)
            raise ValueError(f"unknown device type '{self.device_type}'; known: {known}")
        if not isinstance(self.device_id, int) or self.device_id < 0:
            raise ValueError(f"device id must be a non-negative int, got ({self.device_id!r})")

    @property
    def dlpack_code(self) -> int:
        return DLPACK_CODES[self.device_type]

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"


def cpu(device_id: int = 0) -> Device:
    return Device("cpu", device_id)


def cuda(device_id: int = 0) -> Device:
    return Device("cuda", device_id)


def device(device_type: str, device_id: int = 0) -> Device:
    """`rm.device("cuda", 0)`; "llvm" names the CPU, as a target kind does in TVM."""
    return Device(TARGET_DEVICE.get(device_type, device_type), device_id)
