"""Where an export's file goes: what the user named, never something else in its place.

A finished export is written next to its destination and renamed onto it, so a reader
never sees half a file. Renaming onto a path replaces whatever the path is, so the
rename goes to the file a symlink points to (the link stays), and a destination that
is not a regular file (a FIFO, `/dev/null`, `/dev/stdout`, another device) is written
into as it is, never replaced.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path


def written_in_place(target: Path) -> bool:
    """Whether `target` exists and is neither a regular file nor a directory: written to as
    it is (a FIFO, a device), not replaced by a rename."""
    try:
        mode = os.stat(target).st_mode  # through symlinks
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def real_path(target: Path) -> Path:
    """`target` with its symlinks followed (a link that points nowhere yet: where it points)."""
    return Path(os.path.realpath(target))


def scratch_directory(target: Path) -> Path:
    """Where to write the file that becomes `target`: next to the file it will replace (a
    rename stays on one disk), or, for a destination written in place (`/dev/null`), the
    temporary directory (its own directory may not take new files)."""
    return Path(tempfile.gettempdir()) if written_in_place(target) else real_path(target).parent


def put_in_place(finished: Path, target: Path) -> Path:
    """Move the `finished` file (written in `scratch_directory(target)`) to `target`, as the
    module's docstring says; the path written."""
    if written_in_place(target):
        with finished.open("rb") as source, target.open("wb") as sink:
            shutil.copyfileobj(source, sink)
        finished.unlink()
        return target
    final = real_path(target)
    os.replace(finished, final)
    return final
