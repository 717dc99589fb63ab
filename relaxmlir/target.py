"""`rm.target.Target`: what code is compiled for, as data (MLIR-free).

A target is a kind ("llvm" for the CPU, "cuda") plus attributes. CPU targets carry the LLVM CPU
name, the instruction-set features, the core count and the cache sizes; everything derived from
them (vector width, vector registers) is a property, so schedules, weight layouts, pipelines and
code generation all read one object. `Target("llvm")` describes this machine (read from
/proc/cpuinfo and /sys); a named CPU (`-mcpu=x86-64-v3`) describes that CPU, whatever runs the
compiler, so an AVX2 build can be made and tested on an AVX-512 machine.

    Target("llvm")                                    # the host CPU, all its cores
    Target("llvm -mcpu=x86-64-v3 -num-cores=2")       # TVM's string form
    Target({"kind": "llvm", "mcpu": "haswell", "num-cores": 1})
    Target("llvm -mtriple=aarch64-unknown-linux-gnu")  # another architecture's baseline CPU
    Target("cuda"), Target({"kind": "cuda", "arch": "sm_80"})
    with Target("llvm -mcpu=x86-64-v3"): ...          # Target.current()
"""

from __future__ import annotations

import os
import platform
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional, Union

# -- CPUs ---------------------------------------------------------------------------------------
# LLVM feature names this project passes on (others in /proc/cpuinfo are left to -mcpu).
X86_FEATURES = (
    "sse", "sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "avx", "avx2", "fma",
    "f16c", "bmi", "bmi2", "lzcnt", "movbe", "avx512f", "avx512cd", "avx512bw", "avx512dq",
    "avx512vl", "avx512vnni", "avx512bf16", "avx512vbmi", "avx512vbmi2", "avx512ifma",
    "avx512bitalg", "avx512vpopcntdq", "avx512fp16", "avxvnni",
)  # fmt: skip
AARCH64_FEATURES = ("neon", "fp-armv8", "fullfp16", "dotprod", "bf16", "i8mm", "sve", "sve2")

_V1 = ("sse", "sse2")
_V2 = _V1 + ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16")
_V3 = _V2 + ("avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe")
_V4 = _V3 + ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")
_ICX = _V4 + ("avx512vnni", "avx512vbmi", "avx512vbmi2", "avx512ifma", "avx512bitalg",
              "avx512vpopcntdq")  # fmt: skip
# CPU name (as LLVM spells it) -> (architecture, features it implies).
CPUS: dict[str, tuple[str, tuple[str, ...]]] = {
    "x86-64": ("x86_64", _V1),
    "x86-64-v2": ("x86_64", _V2),
    "x86-64-v3": ("x86_64", _V3),
    "x86-64-v4": ("x86_64", _V4),
    "haswell": ("x86_64", _V3),
    "skylake": ("x86_64", _V3),
    "skylake-avx512": ("x86_64", _V4),
    "cascadelake": ("x86_64", _V4 + ("avx512vnni",)),
    "icelake-server": ("x86_64", _ICX),
    "sapphirerapids": ("x86_64", _ICX + ("avx512bf16", "avx512fp16", "avxvnni")),
    "znver2": ("x86_64", _V3),
    "znver3": ("x86_64", _V3),
    "znver4": ("x86_64", _ICX + ("avx512bf16",)),
    "znver5": ("x86_64", _ICX + ("avx512bf16", "avxvnni")),
    "generic": ("aarch64", ("neon", "fp-armv8")),
    "neoverse-n1": ("aarch64", ("neon", "fp-armv8", "fullfp16", "dotprod")),
    "neoverse-v1": ("aarch64", ("neon", "fp-armv8", "fullfp16", "dotprod", "bf16", "i8mm", "sve")),
}

# -- GPUs ---------------------------------------------------------------------------------------
# Compute capability -> PTX ISA version that LLVM must target (the default, 6.0, is refused for
# sm_90 by an LLVM fatal error, so every entry names its own).
CUDA_ARCHS: dict[str, dict[str, Any]] = {
    "sm_80": {"ptx": 70, "max-shared-memory-per-block": 163 * 1024},
    "sm_86": {"ptx": 71, "max-shared-memory-per-block": 99 * 1024},
    "sm_89": {"ptx": 78, "max-shared-memory-per-block": 99 * 1024},
    "sm_90": {"ptx": 80, "max-shared-memory-per-block": 227 * 1024},
    # Hopper with its arch-specific instructions (wgmma): PTX for sm_90a runs on sm_90 devices
    # only (H100, H200), not on later ones
    "sm_90a": {"ptx": 80, "max-shared-memory-per-block": 227 * 1024},
}

# -- Kinds --------------------------------------------------------------------------------------
# Attributes each kind accepts, with their types (lists are comma-separated in strings).
KINDS: dict[str, dict[str, type]] = {
    "llvm": {
        "mcpu": str, "mattr": list, "mtriple": str, "num-cores": int,
        "l1d-cache": int, "l2-cache": int, "l3-cache": int,
    },
    "cuda": {
        "arch": str, "max-threads-per-block": int, "max-shared-memory-per-block": int,
        "thread-warp-size": int, "num-cores": int,
        # 1: float32 matmuls may run on tensor cores in TF32 (10-bit mantissa products, float32
        # sums), as torch.backends.cuda.matmul.allow_tf32; off by default, as in torch
        "allow-tf32": int,
    },
}  # fmt: skip
DEVICE_OF_KIND = {"llvm": "cpu", "cuda": "cuda"}
_ALIASES = {"cpu": "llvm", "c": "llvm", "nvidia/h100": "cuda"}


def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


_CPUINFO_TO_LLVM = {
    "pni": "sse3", "sse4_1": "sse4.1", "sse4_2": "sse4.2", "bmi1": "bmi", "abm": "lzcnt",
    "avx512_vnni": "avx512vnni", "avx512_bf16": "avx512bf16", "avx512_vbmi2": "avx512vbmi2",
    "avx512_bitalg": "avx512bitalg", "avx512_vpopcntdq": "avx512vpopcntdq", "avx512_fp16": "avx512fp16", "avx_vnni": "avxvnni",
    "asimd": "neon", "fp": "fp-armv8", "fphp": "fullfp16", "asimddp": "dotprod", "bf16": "bf16",
    "i8mm": "i8mm", "sve": "sve", "sve2": "sve2",
}  # fmt: skip


def _host_features(arch: str, info: dict[str, str]) -> tuple[str, ...]:
    flags = (info.get("flags") or info.get("Features") or "").split()
    known = X86_FEATURES if arch == "x86_64" else AARCH64_FEATURES
    found = {_CPUINFO_TO_LLVM.get(f, f) for f in flags}
    if arch == "x86_64":
        found |= {"sse", "sse2"}  # baseline of x86-64
    return tuple(f for f in known if f in found)


def _host_cpu(arch: str, features: tuple[str, ...], info: dict[str, str]) -> str:
    """LLVM's name for this CPU where known (the scheduling model), else the x86-64 level."""
    if arch == "aarch64":
        return "generic"
    family, model = info.get("cpu family", ""), info.get("model", "")
    if info.get("vendor_id") == "AuthenticAMD" and family.isdigit() and model.isdigit():
        family_n, model_n = int(family), int(model)
        if family_n == 26:
            return "znver5"
        if family_n == 25:
            zen4 = 0x10 <= model_n <= 0x1F or 0x60 <= model_n <= 0x7F or 0xA0 <= model_n <= 0xAF
            return "znver4" if zen4 and "avx512f" in features else "znver3"
        if family_n == 23:
            return "znver2"
    return x86_level(features)


def _generic(mcpu: str) -> bool:
    """An x86-64 micro-architecture level or aarch64's baseline, rather than a CPU model."""
    return mcpu.startswith("x86-64") or mcpu == "generic"


def x86_level(features) -> str:
    """The highest x86-64 micro-architecture level whose features are all in `features`."""
    for level in ("x86-64-v4", "x86-64-v3", "x86-64-v2"):
        if set(CPUS[level][1]) <= set(features):
            return level
    return "x86-64"


def _host_caches() -> dict[str, int]:
    out = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in range(8):
        folder = f"{base}/index{index}"
        try:
            level = open(f"{folder}/level").read().strip()
            kind = open(f"{folder}/type").read().strip()
            size = open(f"{folder}/size").read().strip()
        except OSError:
            break
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        value = int(size.rstrip("KMG")) * scale
        if kind in ("Data", "Unified"):
            out[{"1": "l1d-cache", "2": "l2-cache", "3": "l3-cache"}.get(level, "")] = value
    out.pop("", None)
    return out


def host_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@lru_cache(maxsize=1)
def host_cpu() -> dict[str, Any]:
    """This machine: architecture, LLVM CPU name, features and cache sizes."""
    arch = platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
    info = _cpuinfo()
    features = _host_features(arch, info)
    return {
        "arch": arch,
        "mcpu": _host_cpu(arch, features, info),
        "features": features,
        "caches": _host_caches(),
        "model-name": info.get("model name", ""),
    }


# -- The Target ---------------------------------------------------------------------------------

_CURRENT = threading.local()


def _parse_string(text: str) -> dict[str, Any]:
    tokens = text.split()
    if not tokens:
        raise ValueError("empty target string")
    config: dict[str, Any] = {"kind": tokens[0]}
    for token in tokens[1:]:
        if not token.startswith("-") or "=" not in token:
            raise ValueError(f"target option ({token}) is not of the form -key=value")
        key, _, value = token[1:].partition("=")
        config[key] = value
    return config


def _coerce(kind: str, key: str, value: Any) -> Any:
    if key not in KINDS[kind]:
        raise ValueError(
            f"target kind '{kind}' has no attribute '{key}'; attributes: {', '.join(KINDS[kind])}"
        )
    want = KINDS[kind][key]
    try:
        if want is int:
            out = int(value)
            if out < 1:
                raise ValueError
            return out
        if want is list:
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(v).strip() for v in items if str(v).strip())
        return str(value)
    except (TypeError, ValueError):
        raise ValueError(f"target attribute '{key}' expects a positive {want.__name__}, got ({value!r})") from None


@dataclass(frozen=True)
class Target:
    """A compilation target; hashable and printable (`str(t)` parses back to an equal target)."""

    kind: str
    attrs: tuple  # sorted (key, value) pairs
    host: Optional["Target"] = None

    def __init__(self, target: Union[str, dict, "Target"], host: Union[str, dict, "Target", None] = None):
        if isinstance(target, Target):
            config = {"kind": target.kind, **dict(target.attrs)}
            host = host if host is not None else target.host
        elif isinstance(target, str):
            config = _parse_string(target)
        elif isinstance(target, dict):
            config = dict(target)
        else:
            raise TypeError(f"Target expects a string, a dict or a Target, got {type(target).__name__}")
        kind = str(config.pop("kind", ""))
        kind = _ALIASES.get(kind, kind)
        host = config.pop("host", host)
        if kind not in KINDS:
            raise ValueError(f"unknown target kind '{kind}'; known: {', '.join(KINDS)}")
        attrs = {key: _coerce(kind, key, value) for key, value in config.items()}
        if kind == "llvm":
            _complete_cpu(attrs)
        else:
            _complete_cuda(attrs)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "attrs", tuple(sorted(attrs.items())))
        if kind == "cuda" and host is None:
            host = Target("llvm")
        object.__setattr__(self, "host", Target(host) if host is not None else None)

    # -- access ---------------------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.attrs).get(key, default)

    def __getitem__(self, key: str) -> Any:
        return dict(self.attrs)[key]

    @property
    def device_type(self) -> str:
        return DEVICE_OF_KIND[self.kind]

    @property
    def num_cores(self) -> int:
        return self.get("num-cores", 1)

    # -- CPU ------------------------------------------------------------------------------------
    @property
    def mcpu(self) -> str:
        return self.get("mcpu", "")

    @property
    def arch(self) -> str:
        if self.kind == "cuda":
            return self.get("arch")
        return CPUS[self.mcpu][0]

    @property
    def features(self) -> frozenset:
        """The instruction-set features code may use: the CPU's, with -mattr's +/- applied."""
        if self.kind != "llvm":
            return frozenset()
        out = set(CPUS[self.mcpu][1])
        for item in self.get("mattr", ()):
            (out.add if item[0] == "+" else out.discard)(item[1:])
        return frozenset(out)

    def has(self, feature: str) -> bool:
        return feature in self.features

    @property
    def vector_bits(self) -> int:
        """Width of one SIMD register that schedules fill (512 on AVX-512, 256 on AVX2, else 128)."""
        if self.kind != "llvm":
            return 128
        if self.has("avx512f"):
            return 512
        if self.has("avx"):
            return 256
        return 128

    @property
    def vector_registers(self) -> int:
        """Architectural SIMD registers: 32 zmm with AVX-512, 16 ymm/xmm on x86-64, 32 on NEON."""
        if self.kind == "llvm" and self.arch == "x86_64" and not self.has("avx512f"):
            return 16
        return 32

    def lanes(self, dtype: str = "float32") -> int:
        bits = {"float64": 64, "int64": 64, "float16": 16, "bfloat16": 16, "int16": 16,
                "int8": 8, "uint8": 8, "bool": 8}.get(dtype, 32)  # fmt: skip
        return max(1, self.vector_bits // bits)

    @property
    def triple(self) -> str:
        return self.get("mtriple") or {"x86_64": "x86_64-unknown-linux-gnu",
                                       "aarch64": "aarch64-unknown-linux-gnu"}[self.arch]  # fmt: skip

    def llvm_features(self) -> str:
        """The LLVM target-features string: every known feature, + when usable, else -."""
        known = X86_FEATURES if self.arch == "x86_64" else AARCH64_FEATURES
        return ",".join(("+" if f in self.features else "-") + f for f in known)

    def runs_on_host(self) -> list[str]:
        """Features this target uses that the machine running Python lacks ([] = can JIT here)."""
        host = host_cpu()
        if self.kind != "llvm":
            return []
        if self.arch != host["arch"]:
            return [f"architecture {self.arch}"]
        return sorted(self.features - set(host["features"]))

    # -- CUDA -----------------------------------------------------------------------------------
    @property
    def ptx_version(self) -> int:
        return CUDA_ARCHS[self.get("arch")]["ptx"]

    # -- forms ----------------------------------------------------------------------------------
    def __str__(self) -> str:
        parts = [self.kind]
        for key, value in self.attrs:
            text = ",".join(value) if isinstance(value, tuple) else str(value)
            parts.append(f"-{key}={text}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def export(self) -> dict:
        out: dict[str, Any] = {"kind": self.kind}
        out.update({k: list(v) if isinstance(v, tuple) else v for k, v in self.attrs})
        if self.host is not None:
            out["host"] = self.host.export()
        return out

    # -- context --------------------------------------------------------------------------------
    def __enter__(self) -> "Target":
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack().pop()

    @staticmethod
    def current(allow_none: bool = True) -> Optional["Target"]:
        stack = _stack()
        if stack:
            return stack[-1]
        if not allow_none:
            raise ValueError("no target in scope: use `with rm.target.Target(...):`")
        return None

    @staticmethod
    def from_device(device: Any) -> "Target":
        kind = getattr(device, "device_type", str(device))
        return Target({"cpu": "llvm"}.get(kind, kind))


def _stack() -> list:
    if not hasattr(_CURRENT, "stack"):
        _CURRENT.stack = []
    return _CURRENT.stack


def _complete_cpu(attrs: dict) -> None:
    """Fill what the user did not say: the host's CPU, features and caches for `llvm`, the
    host's cores always; a named CPU keeps its own features (not the host's), and takes the
    host's caches only when it is the host's CPU: a generic level (`x86-64-v4`) or another
    model names no cache sizes, and the schedules' defaults stand in for them (the IR of a
    build for `-mcpu=x86-64-v4` had depended on the L2 of the machine it was built on)."""
    host = host_cpu()
    arch = _triple_arch(attrs["mtriple"]) if "mtriple" in attrs else host["arch"]
    if "mcpu" not in attrs and arch != host["arch"]:
        attrs["mcpu"] = BASE_CPUS[arch]  # another architecture: its baseline, not the host's CPU
    # A generic level is never "the host's own CPU", even where it is the best name the host
    # has (an Intel Xeon whose VM hides features of its model): `-mcpu=x86-64-v4` had taken a
    # Emerald Rapids host's 2 MB L2 and changed the lit tests' schedules.
    own = "mcpu" not in attrs or (attrs["mcpu"] == host["mcpu"] and not _generic(host["mcpu"]))
    if "mcpu" not in attrs:
        mcpu = host["mcpu"]
        if mcpu in CPUS and not set(CPUS[mcpu][1]) <= set(host["features"]):
            mcpu = x86_level(host["features"])  # a VM may hide features its CPU model implies
        attrs["mcpu"] = mcpu
        implied = set(CPUS[mcpu][1])
        extra = [f"+{f}" for f in host["features"] if f not in implied]
        if extra and "mattr" not in attrs:
            attrs["mattr"] = tuple(extra)
    if attrs["mcpu"] not in CPUS:
        raise ValueError(f"unknown CPU '{attrs['mcpu']}'; known: {', '.join(CPUS)}")
    if "mtriple" not in attrs:
        arch = CPUS[attrs["mcpu"]][0]
    elif CPUS[attrs["mcpu"]][0] != arch:
        raise ValueError(
            f"-mcpu={attrs['mcpu']} is an {CPUS[attrs['mcpu']][0]} CPU, but -mtriple="
            f"{attrs['mtriple']} is {arch}"
        )
    known = X86_FEATURES if arch == "x86_64" else AARCH64_FEATURES
    for item in attrs.get("mattr", ()):
        if len(item) < 2 or item[0] not in "+-" or item[1:] not in known:
            raise ValueError(
                f"-mattr: ({item}) is not +feature or -feature of {arch}; features: {', '.join(known)}"
            )
    attrs.setdefault("num-cores", host_cores())
    for key, value in host["caches"].items() if own else ():
        attrs.setdefault(key, value)


# The baseline CPU of each architecture, for a -mtriple of another architecture than the host's.
BASE_CPUS = {"x86_64": "x86-64", "aarch64": "generic"}
_TRIPLE_ARCHS = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def _triple_arch(triple: str) -> str:
    """The architecture of a -mtriple; code is only made for Linux (ELF shared libraries that
    `load_module` opens), so another system is refused here rather than by the linker."""
    parts = triple.split("-")
    arch = _TRIPLE_ARCHS.get(parts[0])
    if arch is None or "linux" not in parts[1:]:
        raise ValueError(
            f"-mtriple={triple}: expected an x86_64 or aarch64 Linux triple "
            "(x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu)"
        )
    return arch


def _complete_cuda(attrs: dict) -> None:
    attrs.setdefault("arch", "sm_90")
    if attrs["arch"] not in CUDA_ARCHS:
        raise ValueError(f"unknown CUDA arch '{attrs['arch']}'; known: {', '.join(CUDA_ARCHS)}")
    attrs.setdefault("max-threads-per-block", 1024)
    attrs.setdefault("thread-warp-size", 32)
    attrs.setdefault("max-shared-memory-per-block", CUDA_ARCHS[attrs["arch"]]["max-shared-memory-per-block"])


def as_target(target: Union[str, dict, Target, None]) -> Target:
    """`relax.build`'s target argument: a Target, its string/dict form, or None (the target in
    scope, else the host CPU)."""
    if target is None:
        return Target.current() or Target("llvm")
    return target if isinstance(target, Target) else Target(target)
