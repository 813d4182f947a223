"""Optional, reversible patches applied when their module is imported.

A `Patch` names a module and a dotted attribute inside it, wrapped with wrapt. A
`Replacement` is for the few functions called for every line or entry of a turn:
a wrapt wrapper costs the agent many times what a plain function calling the original
does (benchmarks/NOTES.md, "End to end").

`PatchSet.activate()` applies every patch whose module is already imported and
registers a wrapt post-import hook for the others, so a module imported after
`instrument()` is patched too; `activate_imported()` applies the patches of one module,
from a post-import hook of the caller's. Every patch is optional: a module or attribute that
this version of the library lacks is skipped, never raised, and logged once: at DEBUG in a
tested version (the targets of older versions), at WARNING in a newer, untested one
(`untested`), where what that target captured is now missing.
`deactivate()` restores exactly the originals it replaced; post-import hooks
cannot be unregistered, so they check whether their set is still active.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

import wrapt

# No NullHandler: in a program that configured no logging, Python's last-resort handler prints
# these WARNINGs on stderr (an untested library version, what it lacks), as it should.
_logger = logging.getLogger(__name__)

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class Patch:
    """Wrap `module.attribute` (e.g. `"Adapter.evaluate"`) with `wrapper`."""

    module: str
    attribute: str
    wrapper: Wrapper


Factory = Callable[[Callable[..., Any]], Callable[..., Any]]


# Makes a class's table of handlers (a dict subclass, so that it carries our marks) from the original.
TableFactory = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Replacement:
    """Replace `module.attribute` (a plain function or method) with `make(original)`, a plain
    function that calls `original` itself (for methods, with `self` first); or a class's table
    of handlers with the table `make` builds from it."""

    module: str
    attribute: str
    make: Factory | TableFactory


# Marks a replacement with the `Replacement` that made it (what wrapt's `_self_wrapper` is to a Patch).
_MADE_BY: Final = "_transcript_otel_replacement"


@dataclass(slots=True)
class _Applied:
    parent: Any
    name: str
    original: Any
    wrapped: Any


class PatchSet:
    """The patches of one instrumentor, applied and removed together."""

    def __init__(self, name: str, patches: Iterable[Patch | Replacement]) -> None:
        self.name = name
        self.patches = tuple(patches)
        self._active = False
        self._applied: dict[tuple[str, str], _Applied] = {}
        self._hooked: set[str] = set()
        self._reported_missing: set[tuple[str, str]] = set()
        # Set by the instrumentor: `"<library> <version>"` when that version is newer than the
        # newest tested, and the targets that newest tested version lacks already.
        self.untested: str | None = None
        self.expected_missing: frozenset[str] = frozenset()
        self._lock = threading.RLock()

    @property
    def applied(self) -> list[str]:
        """`module:attribute` of every patch in place now."""
        with self._lock:
            return sorted(f"{module}:{attribute}" for module, attribute in self._applied)

    def activate(self) -> None:
        with self._lock:
            self._active = True
            for module_name in dict.fromkeys(patch.module for patch in self.patches):
                loaded = sys.modules.get(module_name)
                if loaded is not None:
                    self._apply_module(loaded)
                if module_name not in self._hooked:
                    self._hooked.add(module_name)
                    wrapt.register_post_import_hook(self._on_import, module_name)

    def activate_imported(self, module: ModuleType) -> None:
        """Apply the patches of `module`, whose import just completed, and no other: for a set
        built by a post-import hook, where every other module has a hook of its own. A module
        found in `sys.modules` then may still be executing (the one that imported `module`):
        `activate()` would find its attributes missing and never look again."""
        with self._lock:
            self._active = True
            self._apply_module(module)

    def deactivate(self) -> None:
        with self._lock:
            self._active = False
            for applied in self._applied.values():
                # Only put the original back if our wrapper is still what is installed.
                if applied.parent.__dict__.get(applied.name) is applied.wrapped:
                    setattr(applied.parent, applied.name, applied.original)
            self._applied.clear()

    def _on_import(self, module: ModuleType) -> None:
        with self._lock:
            if self._active:
                self._apply_module(module)

    def _apply_module(self, module: ModuleType) -> None:
        for patch in self.patches:
            if patch.module == module.__name__ and (patch.module, patch.attribute) not in self._applied:
                self._apply(module, patch)

    def _apply(self, module: ModuleType, patch: Patch | Replacement) -> None:
        key = (patch.module, patch.attribute)
        try:
            parent, name, original = wrapt.resolve_path(module, patch.attribute)
        except AttributeError:
            if key not in self._reported_missing:
                self._reported_missing.add(key)
                self._report_missing(patch)
            return
        if _is_made_by(original, patch):
            # A name imported from a module this set patched already: it is our wrapper, which
            # must not wrap itself, and which `deactivate()` replaces by the original here too.
            ours: Any = original  # a FunctionWrapper or a function made by `functools.wraps`
            self._applied[key] = _Applied(parent, name, ours.__wrapped__, original)
            return
        try:
            wrapped = _patched(original, patch)
            setattr(parent, name, wrapped)
        except Exception as exc:  # a patch must never break the host's import
            _logger.warning("%s: could not patch %s.%s: %r", self.name, patch.module, patch.attribute, exc)
            return
        self._applied[key] = _Applied(parent, name, original, wrapped)

    def _report_missing(self, patch: Patch | Replacement) -> None:
        target = f"{patch.module}:{patch.attribute}"
        if self.untested is None or target in self.expected_missing:
            _logger.debug("%s: %s.%s not found; not patched", self.name, patch.module, patch.attribute)
        elif (self.name, target) not in _warned_missing:
            _warned_missing.add((self.name, target))
            _logger.warning(
                "transcript-otel: %s.%s not found in %s (untested); not patched: what it captured is missing",
                patch.module,
                patch.attribute,
                self.untested,
            )


# (set name, target) warned about: once a process, whatever re-instruments.
_warned_missing: set[tuple[str, str]] = set()


def _patched(original: Any, patch: Patch | Replacement) -> Any:
    if isinstance(patch, Patch):
        return wrapt.FunctionWrapper(original, patch.wrapper)
    made = patch.make(original)
    replacement: Any
    if callable(made):
        replacement = functools.wraps(original)(made)  # sets `__wrapped__`
    else:  # a table: `__wrapped__` set as `functools.wraps` sets it on a function
        replacement = made
        setattr(replacement, "__wrapped__", original)  # noqa: B010
    setattr(replacement, _MADE_BY, patch)
    return replacement


def _is_made_by(installed: Any, patch: Patch | Replacement) -> bool:
    if isinstance(patch, Patch):
        return isinstance(installed, wrapt.FunctionWrapper) and installed._self_wrapper is patch.wrapper
    return getattr(installed, _MADE_BY, None) is patch


def takes(function: Callable[..., Any], parameters: str) -> bool:
    """Whether `function`'s parameters, annotations left out, read exactly `parameters`, as
    `"(self, line)"`: a replacement may then take and pass them as they are, rather than
    through `*args, **kwargs` (which costs more, on every call)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    plain = [
        parameter.replace(annotation=inspect.Parameter.empty) for parameter in signature.parameters.values()
    ]
    return str(inspect.Signature(plain)) == parameters
