"""A command line read as the npm CLIs built on yargs read theirs (Gemini CLI, OpenCode).

yargs gives an option that takes a value the next word (`--name=value`: its own), an array
option every word up to the next option, a boolean none; after `--` every word is positional.
An option it was not told of takes the next word as its value, so past one, which words are
positional cannot be told from the command line alone.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple


class YargsWords(NamedTuple):
    """The first value of each option, the positional words, and whether every option was known
    (else the positional words may have lost one to an option's value)."""

    options: dict[str, str]
    positional: list[str]
    known: bool


def scan_yargs(
    words: Sequence[str],
    value_options: Collection[str],
    list_options: Collection[str],
    flags: Collection[str],
) -> YargsWords:
    """`words` (the command line after the program) as yargs reads them."""
    options: dict[str, str] = {}
    positional: list[str] = []
    known = True
    pending = list(reversed(words))  # the next word last: taken with pop()
    while pending:
        word = pending.pop()
        if word == "--":
            positional.extend(reversed(pending))
            break
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        name, equals, value = word.partition("=")
        if not equals and name in value_options and pending:
            value = pending.pop()
        elif not equals and name in list_options:
            while pending and not pending[-1].startswith("-"):
                pending.pop()
        elif name not in value_options and name not in list_options and name not in flags:
            known = known and name.startswith("--no-")  # `--no-x`: a boolean's negation
        options.setdefault(name, value)
    return YargsWords(options, positional, known)
