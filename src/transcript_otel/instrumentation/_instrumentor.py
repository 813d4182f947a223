"""The lifecycle every transcript-otel instrumentor shares.

A subclass says which patches it needs (`_build`) and which modules they patch
(`patched_modules`). The patches are built when the first of those modules is imported,
and each module's are applied when its import completes; if one is imported already,
`instrument()` builds and applies them at once. `uninstrument()` switches the wrappers
off (bound methods cached before outlive the patch) and restores the originals.

A library newer than the newest version the tests ran is instrumented all the same: the
build logs one WARNING naming both versions, and each patch target that version lacks is
then a WARNING of its own (`_patching.PatchSet.untested`), as is each patched module its
files lack, so a partial capture is never silent; an `entry_module` whose import imports
none of the patched modules (they moved) is a WARNING too. The versions are each
instrumentor's package.py.

Why not at `instrument()`: the wrappers need the emitter, the pipeline and the mappings
(about 30 modules), and `opentelemetry-instrument` instruments every Python process it
starts, most of which never import the harness (issue 30). Until the harness is imported,
an instrumentor costs a process its own module and a post-import hook per patched module.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import wrapt
from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from transcript_otel.version import SEMCONV_SCHEMA_URL, __version__

if TYPE_CHECKING:  # `_build` loads it: an idle instrumentor need not pay for its dataclasses
    from transcript_otel.instrumentation._patching import PatchSet

# No NullHandler: in a program that configured no logging, Python's last-resort handler prints
# these WARNINGs on stderr (an untested library version, what it lacks), as it should.
_logger = logging.getLogger(__name__)


class Switchable(Protocol):
    """What the wrappers of one `instrument()` share; they do nothing once `active` is False."""

    active: bool


class PatchingInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    # The modules the patches of `_build` name (a test checks that they agree). Empty: the
    # patches are built at `instrument()`.
    patched_modules: ClassVar[tuple[str, ...]] = ()
    # The distribution patched, the newest version of it the tests run (the Makefile's and
    # tests/wink_harness.py's pins), and the `module:attribute` targets of older versions that
    # this newest one lacks (their absence in a newer one is expected, not warned).
    library: ClassVar[str] = ""
    newest_tested: ClassVar[str] = ""
    gone_by_newest_tested: ClassVar[frozenset[str]] = frozenset()
    # A module whose import imports some of `patched_modules` in every tested version (the
    # package itself): its import completing with none of them imported means a newer version
    # moved them, and nothing would be captured. Empty: not checked.
    entry_module: ClassVar[str] = ""
    # Class attributes: BaseInstrumentor is a singleton whose __init__ re-runs.
    _state: Switchable | None = None
    _patches: PatchSet | None = None
    _pending: _PendingBuild | None = None

    def _build(self, tracer: trace.Tracer, **kwargs: Any) -> tuple[Switchable, PatchSet]:
        """The shared state and the patches of one `instrument(**kwargs)`."""
        raise NotImplementedError

    def _instrument(self, **kwargs: Any) -> None:
        tracer = trace.get_tracer(
            type(self).__module__, __version__, kwargs.get("tracer_provider"), schema_url=SEMCONV_SCHEMA_URL
        )
        pending = type(self)._pending = _PendingBuild(self, tracer, kwargs)
        if not self.patched_modules or any(name in sys.modules for name in self.patched_modules):
            patch_set = pending.build()  # a failure raises from `instrument()`
            if patch_set is not None:
                patch_set.activate()
            return
        # None is imported yet: each gets its hook now, as `activate()` would register them, and
        # is patched when its own import completes, whichever builds the patches.
        for module_name in self.patched_modules:
            wrapt.register_post_import_hook(pending.on_import, module_name)
        if self.entry_module:
            wrapt.register_post_import_hook(pending.on_entry_import, self.entry_module)

    def _uninstrument(self, **kwargs: Any) -> None:
        cls = type(self)
        cls._pending = None  # the hooks of its modules not imported yet do nothing now
        if cls._state is not None:
            cls._state.active = False
        if cls._patches is not None:
            cls._patches.deactivate()
        cls._state = cls._patches = None

    @property
    def applied_patches(self) -> list[str]:
        """`module:attribute` of every patch in place (what the installed library version offers)."""
        return [] if self._patches is None else self._patches.applied


class _PendingBuild:
    """The patches of one `instrument()`, built at most once, when the first patched module is
    imported; post-import hooks cannot be unregistered, so each checks that its build is still
    the instrumentor's (not undone by `uninstrument()`)."""

    def __init__(
        self, instrumentor: PatchingInstrumentor, tracer: trace.Tracer, kwargs: dict[str, Any]
    ) -> None:
        self._instrumentor = instrumentor
        self._tracer = tracer
        self._kwargs = kwargs
        self._started = False  # a build that failed is not tried again for every module
        self._patch_set: PatchSet | None = None
        # Reentrant: building imports our modules, and this thread may hold it already.
        self._lock = threading.RLock()

    def build(self) -> PatchSet | None:
        """The patch set, built by the first call; None once `uninstrument()` undid this
        `instrument()`, or if building failed."""
        cls = type(self._instrumentor)
        with self._lock:
            if cls._pending is not self:
                return None
            if not self._started:
                self._started = True
                state, self._patch_set = self._instrumentor._build(self._tracer, **self._kwargs)
                self._patch_set.untested = untested = untested_version(cls)
                if untested is not None:
                    _report_missing_modules(cls, untested)
                self._patch_set.expected_missing = cls.gone_by_newest_tested
                cls._state, cls._patches = state, self._patch_set
            return self._patch_set

    def on_import(self, module: ModuleType) -> None:
        try:
            patch_set = self.build()
        except Exception:  # an instrumentor must never break the host's import
            _logger.exception("%s: could not build the patches", type(self._instrumentor).__name__)
            return
        if patch_set is not None:
            patch_set.activate_imported(module)

    def on_entry_import(self, module: ModuleType) -> None:
        cls = type(self._instrumentor)
        with self._lock:
            if cls._pending is not self or self._started:
                return  # undone by `uninstrument()`, or built: a patched module was imported
        _logger.warning(
            "transcript-otel: %s (%s %s) imported none of the modules %s patches (%s); nothing of it "
            "is captured",
            module.__name__,
            cls.library,
            installed_version(cls.library) or "of unknown version",
            cls.__name__,
            ", ".join(cls.patched_modules),
        )


# (library, version) already warned about: one WARNING a process, whatever re-instruments.
_warned_versions: set[tuple[str, str]] = set()


def installed_version(distribution: str) -> str | None:
    """The installed version of `distribution`, or None."""
    # Here, not at the top: importlib.metadata costs an idle instrumentor (issue 30); this runs
    # only when the library is imported.
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, ...]:
    """The release numbers a version starts with (`0.3.0rc1` -> (0, 3, 0)); () if none."""
    found = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in found.group().split(".")) if found else ()


def untested_version(instrumentor: type[PatchingInstrumentor]) -> str | None:
    """`"<library> <version>"` when the installed library is newer than the newest tested one
    (warned about once a process); None when it is a tested version, or unknown."""
    if not instrumentor.library or not instrumentor.newest_tested:
        return None
    installed = installed_version(instrumentor.library)
    if installed is None or _release(installed) <= _release(instrumentor.newest_tested):
        return None
    if (instrumentor.library, installed) not in _warned_versions:
        _warned_versions.add((instrumentor.library, installed))
        _logger.warning(
            "transcript-otel: %s %s is newer than the newest version tested (%s); instrumenting it "
            "anyway (a patch target this version lacks is reported)",
            instrumentor.library,
            installed,
            instrumentor.newest_tested,
        )
    return f"{instrumentor.library} {installed}"


# (library, module) already warned about: once a process.
_warned_modules: set[tuple[str, str]] = set()


def installed_files(distribution: str) -> set[str] | None:
    """The files the installed `distribution` lists (its RECORD), as POSIX paths; None when it
    lists none (an editable install) or is not installed."""
    from importlib import metadata

    try:
        files = metadata.files(distribution)
    except metadata.PackageNotFoundError:
        return None
    return {file.as_posix() for file in files} if files else None


def missing_modules(instrumentor: type[PatchingInstrumentor]) -> list[str]:
    """The patched modules of the installed distribution's packages that its files lack ([] when
    it lists none). A module of another distribution it uses (weakincentives' ACP adapters talk
    through agent-client-protocol's `acp`) is not the distribution's to lack."""
    files = installed_files(instrumentor.library)
    if files is None:
        return []
    packages = {file.partition("/")[0] for file in files}
    return [
        module
        for module in instrumentor.patched_modules
        if module.partition(".")[0] in packages
        and not {f"{module.replace('.', '/')}.py", f"{module.replace('.', '/')}/__init__.py"} & files
    ]


def _report_missing_modules(instrumentor: type[PatchingInstrumentor], untested: str) -> None:
    """One WARNING per patched module an untested version does not have: its hook never fires,
    so its patches would be skipped without a word."""
    for module in missing_modules(instrumentor):
        if module in instrumentor.gone_by_newest_tested or (instrumentor.library, module) in _warned_modules:
            continue
        _warned_modules.add((instrumentor.library, module))
        _logger.warning(
            "transcript-otel: module %s not found in %s (untested); not patched: what it captured is missing",
            module,
            untested,
        )
