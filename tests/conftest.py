"""pytest plugin: `tests/lit/**/*.mlir` files and `# RUN:` Python scripts run as lit tests.

Each lit file is one test item; `relaxmlir.tools.lit.run_lit_file` runs its RUN lines and a
failure shows the RUN line, the command and FileCheck's own report. `REQUIRES: cuda` tests
carry the `gpu` marker (deselected by default) and skip cleanly without a GPU.

Lit files run in subprocesses, so the first lit item starts every selected one on a thread pool
(`RELAXMLIR_LIT_JOBS` workers, default: the CPU count) and each item waits for its own result.
Under pytest-xdist (`-n`) the workers already share the CPUs out, and each collects every item
but runs only those it is sent: there an item runs its own file when its turn comes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

# The compile cache stays off in the test session (results must not depend on, nor write into,
# the user's cache; child processes inherit this); tests/python/test_cache.py turns it on with a
# temporary folder.
os.environ["RELAXMLIR_CACHE"] = "0"
os.environ["RELAXMLIR_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"relaxmlir-test-cache-{os.getpid()}")

# The session starts a few hundred Python processes (lit RUN lines, tuner builders and runners,
# tools' children), each importing the compiler. Where the environment asks for no bytecode
# (PYTHONDONTWRITEBYTECODE), each of them compiled the project's ~200 modules again: 0.5 s a
# process on a fresh clone, a tenth of the run's CPU time. The session writes bytecode (into the
# ignored __pycache__ folders) and its children inherit that.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

ROOT = Path(__file__).resolve().parents[1]
LIT_DIR = ROOT / "tests" / "lit"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_FEATURES: set[str] | None = None


def _features() -> set[str]:
    global _FEATURES
    if _FEATURES is None:
        from relaxmlir.tools.lit import available_features

        _FEATURES = available_features()
    return _FEATURES


_POOL: ThreadPoolExecutor | None = None
_RESULTS: dict[Path, Future] = {}


def _start_all(session) -> None:
    """Submit every selected lit item (in test order) to the pool, once per session."""
    global _POOL
    if _POOL is not None:
        return
    from relaxmlir.tools.lit import run_lit_file

    jobs = int(os.environ.get("RELAXMLIR_LIT_JOBS", os.cpu_count() or 1))
    _POOL = ThreadPoolExecutor(max_workers=max(jobs, 1), thread_name_prefix="lit")
    for item in session.items:
        if isinstance(item, LitItem) and item.path not in _RESULTS:
            _RESULTS[item.path] = _POOL.submit(run_lit_file, item.path, _features())


def pytest_sessionfinish(session):
    if _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=True)


def _in_lit_dir(path: Path) -> bool:
    return LIT_DIR in Path(path).resolve().parents


def pytest_collect_file(file_path: Path, parent):
    if _in_lit_dir(file_path) and file_path.suffix in (".mlir", ".py"):
        from relaxmlir.tools.lit import is_lit_test

        if is_lit_test(file_path):
            return LitFile.from_parent(parent, path=file_path)
    return None


def pytest_pycollect_makemodule(module_path: Path, parent):
    # Scripts under tests/lit run through their RUN line; they are never imported as modules.
    if _in_lit_dir(module_path):
        return _NoTests.from_parent(parent, path=module_path)
    return None


class _NoTests(pytest.File):
    def collect(self):
        return []


class LitFailure(Exception):
    """A RUN line failed; the message is the whole report."""


class LitFile(pytest.File):
    def collect(self):
        yield LitItem.from_parent(self, name="lit")


class LitItem(pytest.Item):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        from relaxmlir.tools.lit import parse_test

        if "cuda" in parse_test(self.path).requires:
            self.add_marker(pytest.mark.gpu)

    def runtest(self) -> None:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            from relaxmlir.tools.lit import run_lit_file

            result = run_lit_file(self.path, _features())
        else:
            _start_all(self.session)
            result = _RESULTS[self.path].result()
        if result.status == "skip":
            pytest.skip(result.message)
        if result.status == "xfail":
            pytest.xfail(result.message.splitlines()[0])
        if result.status == "fail":
            raise LitFailure(result.message)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, LitFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"lit {self.path.relative_to(ROOT)}"
