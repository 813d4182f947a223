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


# -- one home for each name, and no import circle --------------------------------------------

# Names that are meant to be defined in more than one module: each harness module's `patches`
# (what it patches, read by its instrumentor) and a program's `main` (the command line's and
# the terminal relay's, which runs as a program of its own).
_NAMED_BY_CONVENTION = frozenset({"patches", "main"})


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _public_definitions() -> dict[str, set[str]]:
    """Each public function or class name -> the modules (`sinks.jsonl`) that define it at top level."""
    found: dict[str, set[str]] = {}
    for path in _modules():
        module = _module_name(path).removeprefix("transcript_otel.")
        body = ast.parse(path.read_text(encoding="utf-8")).body
        names = [node.name for node in body if isinstance(node, _DEFINITIONS)]
        for name in names:
            if not name.startswith("_"):
                found.setdefault(name, set()).add(module)
    return found


def test_each_public_name_has_one_home() -> None:
    twice = {
        name: modules
        for name, modules in _public_definitions().items()
        if len(modules) > 1 and name not in _NAMED_BY_CONVENTION
    }
    assert twice == {}, (
        "a public function or class is defined in more than one module: import it from one, "
        "or name each after how it differs"
    )


def _all_imported(path: Path, module: str, modules: set[str]) -> set[str]:
    """The modules of ours `path` imports, relative and `TYPE_CHECKING` imports included:
    `from a.b import c` is `a.b.c` where that is a module, else `a.b` (its `__init__`)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    found = set()
    for name in names:
        while name and name not in modules:  # `a.b.name` -> the module `a.b`
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


def test_no_import_circle() -> None:
    modules = {_module_name(path) for path in _modules()}
    graph = {_module_name(path): _all_imported(path, _module_name(path), modules) for path in _modules()}
    circles = []
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            circles.append([*trail[trail.index(module) :], module])
            return
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, [*trail, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert circles == [], f"modules that import each other: {circles}"


# -- objects composed, modules small ------------------------------------------------------------

MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    """One job a module: a module that outgrows this has two."""
    lengths = {_module_name(path): len(path.read_text(encoding="utf-8").splitlines()) for path in _modules()}
    assert {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES} == {}


def _our_classes(tree: ast.Module) -> set[str]:
    """The names a module binds to classes of ours: those it defines and those it imports from us."""
    names = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("transcript_otel"):
            names.update(alias.asname or alias.name for alias in node.names if alias.name[:1].isupper())
    return names


def test_no_class_derives_from_two_of_ours() -> None:
    """Objects composed, not mixin lattices: a class has at most one base of this package's."""
    lattices = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        ours = _our_classes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base) for base in node.bases]
                if sum(base.split(".")[-1] in ours for base in bases) >= 2:
                    lattices.append(f"{_module_name(path)}.{node.name}({', '.join(bases)})")
    assert lattices == []


# -- what of each subpackage is public -------------------------------------------------------------

REPO = PACKAGE_DIR.parents[1]
_SUBPACKAGES = sorted(path.parent for path in PACKAGE_DIR.glob("*/__init__.py"))
# What the docs tell a user to call or import: `from transcript_otel.x import`, `transcript_otel.x.f(`.
# (A logger's or an exception's dotted name in the docs is not an interface.)
_USED_IN_DOCS = (r"from (transcript_otel(?:\.\w+)+) import", r"`(transcript_otel(?:\.\w+)+)\(")


def _statement(package: Path) -> str:
    """The subpackage's `Public:` or `Internal:` paragraph (its `__init__` docstring's)."""
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    paragraphs = [" ".join(p.split()) for p in docstring.split("\n\n")]
    return next((p for p in paragraphs if p.startswith(("Public:", "Internal:"))), "")


def _declared_public() -> set[str]:
    """Every dotted name a subpackage's `Public:` paragraph names."""
    import re

    names: set[str] = set()
    for package in _SUBPACKAGES:
        if _statement(package).startswith("Public:"):
            names |= set(re.findall(r"`(transcript_otel(?:\.\w+)+)`", _statement(package)))
    return names


@pytest.mark.parametrize("package", _SUBPACKAGES, ids=lambda path: path.name)
def test_each_subpackage_says_what_of_it_is_public(package: Path) -> None:
    """Most modules carry no underscore: each subpackage says which of its names are public
    (`Public: ...`) or that none is (`Internal: ...`)."""
    assert _statement(package), (
        f"transcript_otel.{package.name}'s docstring has no Public:/Internal: paragraph"
    )


def test_what_the_docs_and_entry_points_use_is_declared_public() -> None:
    import importlib
    import re
    import tomllib

    used: set[str] = set()
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for pattern in _USED_IN_DOCS:
            used |= set(re.findall(pattern, text))
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    targets = [*project["scripts"].values()]
    for group in project["entry-points"].values():
        targets += group.values()
    used |= {target.replace(":", ".") for target in targets}
    declared = _declared_public()
    subpackages = {package.name for package in _SUBPACKAGES}
    in_subpackages = {name for name in used if name.split(".")[1] in subpackages}
    undeclared = sorted(
        name for name in in_subpackages if not any(name == d or name.startswith(d + ".") for d in declared)
    )
    assert undeclared == [], "used by the docs or an entry point, but not declared public by its subpackage"
    for name in sorted(declared):  # each declared name exists
        module, _, attribute = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            assert hasattr(importlib.import_module(module), attribute), name
