"""The package's layers: each subpackage imports only those below it (docs/design.md's map).

Read from the source, not run: a module that imports a layer above its own would make the
one-way flow (native event -> mapping -> emitter -> sinks) a circle, and the tree stop saying
which room a newcomer is in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import transcript_otel

PACKAGE_DIR = Path(transcript_otel.__file__).parent
# Bottom to top, as docs/design.md draws them. The root's leaf modules come first; its
# `__init__` (the public names) and the entry points (the configurator, `python -m`) stand
# above everything.
LAYERS = (
    "version",
    "environment_variables",
    "model",
    "otel",
    "records",
    "genai",
    "sinks",
    "capture",
    "otlp",
    "mappings",
    "instrumentation",
    "reading",
    "sessions",
    "exports",
    "cli",
    "configurator",
    "__init__",
    "__main__",
)


def _layer_of(module: str) -> str:
    """`transcript_otel.sinks.jsonl` -> `sinks`; `transcript_otel` -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path) -> set[str]:
    """The modules of ours `path` imports, wherever in the file (function-level imports count)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from transcript_otel import x` names a submodule or a public name: either way
            # what it loads is `transcript_otel.x`'s layer, or the root's.
            if node.module == "transcript_otel":
                names.update(f"transcript_otel.{alias.name}" for alias in node.names)
            else:
                names.add(node.module)
    return {name for name in names if name.split(".")[0] == "transcript_otel"}


def _modules() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def test_every_module_is_in_a_layer() -> None:
    assert {_layer_of(_module_name(path)) for path in _modules()} <= set(LAYERS)


def test_the_root_holds_only_entry_points_and_subpackages() -> None:
    modules = sorted(path.name for path in PACKAGE_DIR.glob("*.py"))
    assert modules == [
        "__init__.py",
        "__main__.py",
        "configurator.py",
        "environment_variables.py",
        "version.py",
    ]


@pytest.mark.parametrize("path", _modules(), ids=lambda path: _module_name(path))
def test_module_imports_only_its_own_layer_and_those_below(path: Path) -> None:
    module = _module_name(path)
    own = LAYERS.index(_layer_of(module))
    above = sorted(
        name for name in _imported(path) if name in _public_names() or LAYERS.index(_layer_of(name)) > own
    )
    # The root's public names are for users: inside the package, import from the defining module.
    assert above == [] or module == "transcript_otel", f"{module} imports a layer above its own: {above}"


def _public_names() -> set[str]:
    return {f"transcript_otel.{name}" for name in transcript_otel.__all__}


@pytest.mark.parametrize("path", _modules(), ids=lambda path: _module_name(path))
def test_module_says_what_it_is_for(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert docstring, f"{_module_name(path)} has no opening docstring"
