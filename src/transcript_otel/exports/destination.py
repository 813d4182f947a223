"""Where an export's file goes: what the user named, never something else in its place.

A finished export is written next to its destination and renamed onto it, so a reader
never sees half a file. Renaming onto a path replaces whatever the path is, so the
rename goes to the file a symlink points to (the link stays), and a destination that
is not a regular file (a FIFO, `/dev/null`, `/dev/stdout`, another device) is written
into as it is, never replaced. A file that is there already keeps its permissions, and
one with other names (hard links) is written into, so that every name sees the export.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

# The rule's two facts, with the layer below that follows it too (the watch's state file).
from transcript_otel.sessions.regular import real_path, written_in_place

__all__ = ["put_in_place", "real_path", "scratch_directory", "written_in_place"]


def scratch_directory(target: Path) -> Path:
    """Where to write the file that becomes `target`: next to the file it will replace (a
    rename stays on one disk), or, for a destination written in place (`/dev/null`), the
    temporary directory (its own directory may not take new files)."""
    return Path(tempfile.gettempdir()) if written_in_place(target) else real_path(target).parent


def put_in_place(finished: Path, target: Path) -> Path:
    """Move the `finished` file (written in `scratch_directory(target)`) to `target`, as the
    module's docstring says; the path written."""
    if written_in_place(target):
        return _copied_into(finished, target)
    final = real_path(target)
    try:
        existing = os.stat(final)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISREG(existing.st_mode):
        if existing.st_nlink > 1:
            return _copied_into(finished, final)
        os.chmod(finished, stat.S_IMODE(existing.st_mode))
    os.replace(finished, final)
    return final


def _copied_into(finished: Path, target: Path) -> Path:
    with finished.open("rb") as source, target.open("wb") as sink:
        shutil.copyfileobj(source, sink)
    finished.unlink()
    return target
