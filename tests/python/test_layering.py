"""The import graph is layered: stages as folders, each importing only its own or lower ones.

    runtime   relaxmlir/runtime/, relaxmlir/target.py, relaxmlir/__init__.py (numpy + ctypes)
    dialects  dialects/                                    (+ mlir)
    lowering  lowering/                                    (passes, pipelines, JIT)
    compiler  relaxmlir/ (te, topi, relax, frontend, ...)  (the user API over the compiler)
    tools     relaxmlir/tools/, scripts/

Every import counts, also those inside functions (a lazy import still ties two files), and the
files form no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ["runtime", "dialects", "lowering", "compiler", "tools"]


def stage_of(rel: str) -> str:
    if rel.startswith("relaxmlir/runtime/") or rel in ("relaxmlir/target.py", "relaxmlir/__init__.py"):
        return "runtime"
    if rel.startswith("dialects/"):
        return "dialects"
    if rel.startswith("lowering/"):
        return "lowering"
    if rel.startswith(("relaxmlir/tools/", "scripts/")):
        return "tools"
    return "compiler"


def module_file(module: str) -> str | None:
    """`relaxmlir.relax.op` -> its file, relative to the repo (None outside the project)."""
    parts = module.split(".")
    if parts[0] not in ("relaxmlir", "dialects", "lowering"):
        return None
    base = ROOT.joinpath(*parts)
    if (base / "__init__.py").exists():
        return str((base / "__init__.py").relative_to(ROOT))
    if base.with_suffix(".py").exists():
        return str(base.with_suffix(".py").relative_to(ROOT))
    return None


def project_files() -> list[Path]:
    files = [p for d in ("relaxmlir", "dialects", "lowering") for p in (ROOT / d).rglob("*.py")]
    return sorted(files + [p for p in (ROOT / "scripts").glob("*.py")])


def imports_of(path: Path) -> set[str]:
    """Project files that `path` imports (`from a.b import c` counts a/b/c.py when c is a module)."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            submodules = [f"{base}.{a.name}" for a in node.names]
            # `from pkg import mod` runs pkg/__init__.py but depends on mod; count the package
            # only when a name comes from it
            names = submodules if all(module_file(m) for m in submodules) else [base, *submodules]
        for name in names:
            found = module_file(name)
            if found:
                out.add(found)
    out.discard(str(path.relative_to(ROOT)))
    return out


def graph() -> dict[str, set[str]]:
    return {str(p.relative_to(ROOT)): imports_of(p) for p in project_files()}


def test_stages_import_only_lower_stages():
    wrong = []
    for src, targets in graph().items():
        for dst in targets:
            if STAGES.index(stage_of(dst)) > STAGES.index(stage_of(src)):
                wrong.append(f"{src} ({stage_of(src)}) imports {dst} ({stage_of(dst)})")
    assert not wrong, "imports against the stage order:\n" + "\n".join(sorted(wrong))


def test_runtime_imports_no_compiler_package():
    """The runtime stage names neither mlir nor a compiler module, even lazily."""
    for path in project_files():
        rel = str(path.relative_to(ROOT))
        if stage_of(rel) != "runtime":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(m == "mlir" or m.startswith("mlir.") for m in mods), f"{rel} imports mlir"


def test_no_import_cycles():
    g = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in g:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"
