"""Whether a stream is a terminal, where a person reads: what the CLI says for people (colours,
a progress line, a pager) goes there only."""

from __future__ import annotations

from typing import TextIO


def is_terminal(stream: TextIO) -> bool:
    """False too for a stream that cannot tell: replaced (no `isatty`) or closed."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
