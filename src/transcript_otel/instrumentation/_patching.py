"""Optional, reversible patches applied when their module is imported.

A `Patch` names a module and a dotted attribute inside it. `PatchSet.activate()`
applies every patch whose module is already imported and registers a wrapt
post-import hook for the others, so a module imported after `instrument()` is
patched too. Every patch is optional: a module or attribute that this version of
the library lacks is logged once (at DEBUG) and skipped, never raised.
`deactivate()` restores exactly the originals it replaced; post-import hooks
cannot be unregistered, so they check whether their set is still active.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import wrapt

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class Patch:
    """Wrap `module.attribute` (e.g. `"Adapter.evaluate"`) with `wrapper`."""

    module: str
    attribute: str
    wrapper: Wrapper


@dataclass(slots=True)
class _Applied:
    parent: Any
    name: str
    original: Any
    wrapped: Any


class PatchSet:
    """The patches of one instrumentor, applied and removed together."""

    def __init__(self, name: str, patches: Iterable[Patch]) -> None:
        self.name = name
        self.patches = tuple(patches)
        self._active = False
        self._applied: dict[tuple[str, str], _Applied] = {}
        self._hooked: set[str] = set()
        self._reported_missing: set[tuple[str, str]] = set()
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

    def _apply(self, module: ModuleType, patch: Patch) -> None:
        key = (patch.module, patch.attribute)
        try:
            parent, name, original = wrapt.resolve_path(module, patch.attribute)
        except AttributeError:
            if key not in self._reported_missing:
                self._reported_missing.add(key)
                _logger.debug("%s: %s.%s not found; not patched", self.name, patch.module, patch.attribute)
            return
        if isinstance(original, wrapt.FunctionWrapper) and original._self_wrapper is patch.wrapper:
            # A name imported from a module this set patched already: it is our wrapper, which
            # must not wrap itself, and which `deactivate()` replaces by the original here too.
            self._applied[key] = _Applied(parent, name, original.__wrapped__, original)
            return
        try:
            wrapped = wrapt.FunctionWrapper(original, patch.wrapper)
            setattr(parent, name, wrapped)
        except Exception as exc:  # a patch must never break the host's import
            _logger.warning("%s: could not patch %s.%s: %r", self.name, patch.module, patch.attribute, exc)
            return
        self._applied[key] = _Applied(parent, name, original, wrapped)
