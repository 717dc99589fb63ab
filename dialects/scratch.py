"""This user's folder for build products that processes share and rebuild when missing: the
relax dialect's IRDL bytecode (`irdl_dsl.Dialect.definition`) and the native runtime's object
(`lowering.export.runtime_object`); and the stamp of an installed wheel's file, which keys such
products and the compile cache to the MLIR/LLVM build that made them."""

from __future__ import annotations

import importlib.util
import os
import stat
import tempfile


def private_folder() -> str:
    """Under the temporary folder, made mode 0700 and refused (OSError) when someone else owns
    it or can write to it."""
    folder = os.path.join(tempfile.gettempdir(), f"relaxmlir-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise OSError(f"{folder} is not a private folder of this user")
    return folder


def package_file(package: str, name: str) -> str:
    """The path of `name` in the folder of the installed `package`, found without importing it
    ("" when the package is not installed)."""
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or []) if spec else []
    return os.path.join(folders[0], name) if folders else ""


def wheel_stamp(package: str, name: str) -> str:
    """Path, size and modification time of a file that each build of `package` ships (its
    native library): another version or reinstall gives another stamp. The package's name alone
    when the file is missing."""
    path = package_file(package, name)
    try:
        st = os.stat(path)
    except OSError:
        return package
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"
