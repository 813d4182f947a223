"""What finding a run can raise, apart from the code that finds it: the command line catches
these before it has read anything (`reading.sources` is most of a command's start-up)."""

from __future__ import annotations


class RunNotFoundError(LookupError):
    """No run matches what was asked for (the message says where we looked)."""


class NotARunError(ValueError):
    """The file has content, but no transcript record in it."""
