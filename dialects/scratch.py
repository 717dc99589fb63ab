"""This user's folder for build products that processes share and rebuild when missing: the
relax dialect's IRDL bytecode (`irdl_dsl.Dialect.definition`) and the native runtime's object
(`lowering.export.runtime_object`)."""

from __future__ import annotations

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
