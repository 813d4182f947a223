"""The benchmarks' live OTLP receiver: the tests' rotel launcher, exporting to a blackhole.

rotel prints nothing of what it receives here (printing would cost it time the
exporters wait for); its own output and files go to a scratch directory that is
removed afterwards.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rotel_collector import Rotel, rotel_binary


@contextmanager
def blackhole_rotel() -> Iterator[Rotel]:
    """`with blackhole_rotel() as receiver:` -> `receiver.http_endpoint` takes OTLP/HTTP."""
    binary = rotel_binary()
    if binary is None:
        raise RuntimeError("the rotel package is not installed (pip install rotel==0.0.1a15)")
    with (
        tempfile.TemporaryDirectory(prefix="bench-rotel-") as scratch,
        Rotel(binary, Path(scratch), debug_log=()) as receiver,
    ):
        yield receiver
