"""How the fixture recorders go through what they record: one failure does not stop the others,
and any failure is the recorder's exit status 1 (`make fixtures`, and whoever re-records, must
not take a failure for done)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


def record_all(names: Sequence[str], record: Callable[[str], None], what: str = "scenarios") -> None:
    """`record(name)` for each name in turn; then exit 1 naming those that failed, if any."""
    failed = []
    for name in names:
        try:
            record(name)
        except Exception as error:
            print(f"{name}: FAILED {type(error).__name__}: {error}", file=sys.stderr)
            failed.append(name)
    if failed:
        raise SystemExit(f"{len(failed)} of {len(names)} {what} failed to re-record: {', '.join(failed)}")
