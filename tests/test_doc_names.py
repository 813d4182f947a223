"""The docs name only modules and attributes the package has.

A backticked name in docs/*.md or the README that looks like a path into the package must
lead to a module, and from there to attributes, that exist: a module renamed or a function
gone leaves docs that send a newcomer nowhere. A name looks like a path when it starts with
`transcript_otel` or one of its subpackages (`capture.emitter.TranscriptEmitter`,
`sinks/jsonl_buffer.py`, `otel/export_drops.run_before`), with a private module's name
(`_patching.PatchSet`), or with a module's name and then a class's (`export_processors.
BoundedLogRecordProcessor`); `emitter.flush()` is an object's method, not a path.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import transcript_otel

PACKAGE_DIR = Path(transcript_otel.__file__).parent
ROOT = PACKAGE_DIR.parents[1]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
SUBPACKAGES = frozenset(path.parent.name for path in PACKAGE_DIR.glob("*/__init__.py"))
_BACKTICKED = re.compile(r"`([^`\s]+)`")
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[./][A-Za-z_][A-Za-z0-9_]*)+(?:\.py|/)?")


def _module_names() -> list[str]:
    """Every module of the package, dotted (`transcript_otel.sinks.jsonl`; a package by its name)."""
    names = []
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


MODULES = _module_names()
_BASENAMES = frozenset(name.rpartition(".")[2] for name in MODULES)


def _parts(name: str) -> list[str]:
    return [part for part in re.split(r"[./]", name.removesuffix(".py").removesuffix("/")) if part]


def _looks_like_a_path(name: str) -> bool:
    parts = _parts(name)
    first = parts[0]
    if first == "transcript_otel" or first in SUBPACKAGES:
        return True
    if first.startswith("_") and first[1:2].isalpha():  # a private module's name
        return True
    return first in _BASENAMES and len(parts) > 1 and parts[1][:1].isupper()


def _package_paths(text: str) -> set[str]:
    """The backticked names in `text` that look like a path into the package (call
    parentheses and their arguments left off)."""
    found = set()
    for quoted in _BACKTICKED.findall(text):
        match = _PATH.match(quoted)
        if match is not None and _looks_like_a_path(match.group()):
            found.add(match.group())
    return found


def _strings_we_write() -> str:
    """The package's source: a backticked name found in it as a string (a metric's or an
    attribute's name, `transcript_otel.records.dropped`) is a name we write, not a path."""
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted(PACKAGE_DIR.rglob("*.py")))


def _has(module: str, attributes: list[str]) -> bool:
    value: object = importlib.import_module(module)
    for attribute in attributes:
        if not hasattr(value, attribute):
            return False
        value = getattr(value, attribute)
    return True


def _resolves(name: str) -> bool:
    """Whether `name` is a module and attributes in it: from the package's root when it starts
    there or with a subpackage, else from any module whose dotted name ends with its start."""
    parts = _parts(name)
    if parts[0] == "transcript_otel":
        parts = parts[1:]
    anchored = not parts or parts[0] in SUBPACKAGES
    for split in range(len(parts), -1, -1):
        start = ".".join(parts[:split])
        for module in MODULES:
            at_root = module == ".".join(["transcript_otel", *parts[:split]])
            ends_so = bool(start) and not anchored and module.endswith(f".{start}")
            if (at_root or ends_so) and _has(module, parts[split:]):
                return True
    return False


def _cases() -> list[tuple[str, str]]:
    return sorted(
        (doc.relative_to(ROOT).as_posix(), name)
        for doc in DOCS
        for name in _package_paths(doc.read_text(encoding="utf-8"))
    )


def test_the_docs_name_paths_into_the_package() -> None:
    assert len(_cases()) > 20  # the pattern still finds what the docs write


@pytest.mark.parametrize(("doc", "name"), _cases())
def test_named_module_or_attribute_exists(doc: str, name: str) -> None:
    if f'"{name}"' in _strings_we_write():
        return
    assert _resolves(name), f"{doc} names `{name}`, which the package does not have"
