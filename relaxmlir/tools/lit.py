"""A small lit: run a test file's `RUN:` lines through the shell, with lit's substitutions.

`tests/conftest.py` collects `tests/lit/**/*.mlir` and `*.py` scripts through `run_lit_file`.
Directives, in comments (`//` or `#`):
  RUN: <shell command>        one per line; a trailing `\\` continues on the next RUN line
  REQUIRES: cuda[, torch]     skip unless every feature is available (cuda, torch, dnnl)
  UNSUPPORTED: cuda           skip when a feature is available (`*`: always)
  XFAIL: *                    expected to fail (a known bug); passing then fails the test
Files under an `Inputs/` folder are data for other tests, not tests.
Substitutions: %s (the file), %S / %p (its folder), %t (a temp path), %T (a temp folder),
%PYTHON (this Python), %% (a percent sign); the tools `relaxmlir-opt`, `relaxmlir-run`,
`FileCheck`, `not`, `count`, `split-file`, `mlir-opt`, `mlir-translate`, `mlir-runner` become
their real paths. Each RUN line runs in the repo root under `bash -o pipefail`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from relaxmlir.tools import REPO_ROOT, SCRIPTS, tool_path

_DIRECTIVE = re.compile(r"^\s*(?://|#)\s*(RUN|REQUIRES|UNSUPPORTED|XFAIL)\s*:(.*)$")
_TOOLS = ("FileCheck", "not", "count", "split-file", "mlir-opt", "mlir-translate", "mlir-runner")
TIMEOUT_S = 300  # per RUN line; some greedy rewrites never terminate (MLIR_NOTES)


@dataclass
class LitTest:
    path: Path
    run_lines: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    xfail: list[str] = field(default_factory=list)


@dataclass
class LitResult:
    status: str  # "pass" | "fail" | "skip" | "xfail"
    message: str = ""


def parse_test(path: Path) -> LitTest:
    test = LitTest(Path(path))
    pending = ""
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        match = _DIRECTIVE.match(line)
        if match is None:
            continue
        kind, body = match.group(1), match.group(2).strip()
        if kind == "RUN":
            if body.endswith("\\"):
                pending += body[:-1] + " "
                continue
            test.run_lines.append(pending + body)
            pending = ""
        else:
            features = [f.strip() for f in body.split(",") if f.strip()]
            {"REQUIRES": test.requires, "UNSUPPORTED": test.unsupported, "XFAIL": test.xfail}[
                kind
            ].extend(features)
    if pending:
        test.run_lines.append(pending.strip())
    return test


def is_lit_test(path: Path) -> bool:
    """A .mlir file, or a .py script whose header has a RUN line."""
    path = Path(path)
    if "Inputs" in path.parts:
        return False
    if path.suffix == ".mlir":
        return True
    if path.suffix != ".py":
        return False
    with open(path, encoding="utf-8") as f:
        head = [next(f, "") for _ in range(5)]
    return any(_DIRECTIVE.match(line) and "RUN" in line for line in head)


def available_features() -> set[str]:
    features = set()
    try:
        ctypes.CDLL("libcuda.so.1")
        features.add("cuda")
    except OSError:
        pass
    if importlib.util.find_spec("torch") is not None:
        features.add("torch")
    from relaxmlir.runtime import dnnl  # no MLIR; finds libdnnl without opening it

    if dnnl.find_dnnl() and dnnl.libraries.available("dnnl_kernels"):
        features.add("dnnl")
    return features


def tool_commands() -> dict[str, str]:
    """Tool name -> shell text that runs it."""
    py = shlex.quote(sys.executable)
    commands = {name: f"{py} {shlex.quote(str(path))}" for name, path in SCRIPTS.items()}
    for name in _TOOLS:
        path = tool_path(name)
        if path is not None:
            commands[name] = shlex.quote(path)
    return commands


def substitute(command: str, path: Path, tmp: Path, tools: dict[str, str]) -> str:
    path = Path(path).resolve()
    percent = "\0PERCENT\0"
    subs = {
        "%%": percent,
        "%PYTHON": shlex.quote(sys.executable),
        "%s": shlex.quote(str(path)),
        "%S": shlex.quote(str(path.parent)),
        "%p": shlex.quote(str(path.parent)),
        "%t": shlex.quote(str(tmp / (path.name + ".tmp"))),
        "%T": shlex.quote(str(tmp)),
    }
    command = re.sub("|".join(map(re.escape, subs)), lambda m: subs[m.group(0)], command)
    for name, replacement in tools.items():
        # Only whole words in command position style: not part of a path, flag or file name.
        pattern = rf"(?<![\w./=-]){re.escape(name)}(?![\w./-])"
        command = re.sub(pattern, lambda _m, r=replacement: r, command)
    return command.replace(percent, "%")


def _run_shell(command: str, timeout: int) -> tuple[Optional[int], str, str]:
    """(exit status or None on timeout, stdout, stderr); a timeout kills the whole command."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    shell = shutil.which("bash")
    argv = [shell, "-o", "pipefail", "-c", command] if shell else ["/bin/sh", "-c", command]
    proc = subprocess.Popen(
        argv,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so a timeout can end all of it
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return None, stdout, stderr
    return proc.returncode, stdout, stderr


def run_lit_file(
    path: Path, features: Optional[set[str]] = None, timeout: int = TIMEOUT_S
) -> LitResult:
    """Run every RUN line of `path`; the first failing one is reported with its output."""
    test = parse_test(path)
    features = available_features() if features is None else features
    missing = [f for f in test.requires if f not in features]
    if missing:
        return LitResult("skip", f"missing features: {', '.join(missing)}")
    present = [f for f in test.unsupported if f in features or f == "*"]
    if present:
        return LitResult("skip", f"unsupported with: {', '.join(present)}")
    if not test.run_lines:
        return LitResult("fail", f"{path}: no RUN lines")
    failure = _run_lines(test, timeout)
    if any(f == "*" or f in features for f in test.xfail):
        if failure is not None:
            return LitResult("xfail", failure)
        return LitResult("fail", f"{path}: XPASS, passed although marked XFAIL: remove the XFAIL")
    return LitResult("pass") if failure is None else LitResult("fail", failure)


def _run_lines(test: LitTest, timeout: int) -> Optional[str]:
    """None when every RUN line succeeds, else the report of the first one that failed."""
    tools = tool_commands()
    with tempfile.TemporaryDirectory(prefix="lit-") as tmp:
        for number, line in enumerate(test.run_lines, start=1):
            command = substitute(line, test.path, Path(tmp), tools)
            code, stdout, stderr = _run_shell(command, timeout)
            if code != 0:
                status = f"timed out after {timeout} s" if code is None else f"exit status {code}"
                parts = [
                    f"lit test {test.path} failed at RUN line {number} ({status}):",
                    f"  RUN: {line}",
                    f"  command: {command}",
                ]
                if stderr.strip():
                    parts += ["--- stderr ---", stderr.rstrip()]
                if stdout.strip():
                    parts += ["--- stdout (last 4000 characters) ---", stdout.rstrip()[-4000:]]
                return "\n".join(parts)
    return None
