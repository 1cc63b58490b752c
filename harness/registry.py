"""Methods as plug-ins: a name -> factory table the CLI resolves ``--methods`` against.

The harness knows no specific kernel. Packages that provide methods (``baselines``,
``kernels_search`` or a third party) register factories here when imported; they are found
through the ``hgemm_bench.methods`` entry-point group and, for runs from a source tree
without an installed distribution, by importing the built-in plug-in packages by name.

A method spec is ``name`` or ``name:args`` (for example ``triton:bm=128,bn=64``); the factory
receives the args string (or None) and returns one Method or a list of them.

A *method source* turns user files into methods: ``compare --kernels-dir DIR`` hands its
directories to the source registered as ``kernels-dir`` (``kernels_search.extern``), which
registers the methods it finds and returns their specs. A source must make its methods
resolvable in a sandbox worker too (a spawned process that loads the plug-ins again).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable, Sequence

from harness.method import Method

Factory = Callable[[str | None], "Method | list[Method]"]

# Imported by name (a source tree need not be installed); a plug-in that is absent is skipped.
BUILTIN_PLUGINS = ("baselines", "kernels_search", "kernels_search.extern")


class MethodSpecError(ValueError):
    """A --methods entry cannot be turned into methods."""


class UnknownMethodError(MethodSpecError):
    """A --methods entry names nothing that is registered."""


@dataclass
class Entry:
    name: str
    factory: Factory
    default: bool  # part of the default --methods set
    help: str


@dataclass
class MethodSource:
    name: str  # the CLI option without dashes, e.g. "kernels-dir"
    load: Callable[[Sequence[Path]], list[str]]  # register the methods found; return their specs
    help: str
    # compile the loaded specs' binaries at once before the first shape, one line per finished build to
    # the callable; a failed build is reported, not raised (the method's prepare fails with it later)
    prebuild: Callable[[Sequence[str], Callable[[str], None]], object] | None = None


_REGISTRY: dict[str, Entry] = {}
_SOURCES: dict[str, MethodSource] = {}
_loaded = False


def register(name: str, factory: Factory, *, default: bool = False, help: str = "") -> None:
    """Make ``name`` resolvable. Registering a name twice replaces it (plug-in reloads)."""
    _REGISTRY[name] = Entry(name, factory, default, help)


def register_source(name: str, load: Callable[[Sequence[Path]], list[str]], *, help: str = "",
                    prebuild: Callable[[Sequence[str], Callable[[str], None]], object] | None = None) -> None:
    """Make ``name`` a method source. ``load`` raises ValueError, naming the file, for input it
    cannot use; ``prebuild`` (optional) compiles what ``load`` returned, in parallel, before a run."""
    _SOURCES[name] = MethodSource(name, load, help, prebuild)


def method_source(name: str) -> MethodSource | None:
    """The source registered as ``name`` after loading the plug-ins, or None."""
    load_plugins()
    return _SOURCES.get(name)


def plugin_absent(e: ModuleNotFoundError, mod: str) -> bool:
    """Whether ``e`` says ``mod`` itself (or a package above it) is not installed, rather than
    that something it imports is missing (a broken plug-in, reported as such)."""
    parts = mod.split(".")
    return e.name in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def load_plugins() -> None:
    """Import every plug-in package once. A plug-in that fails to import is reported, not fatal."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in BUILTIN_PLUGINS:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if not plugin_absent(e, mod):
                raise
    for ep in metadata.entry_points(group="hgemm_bench.methods"):
        ep.load()


def entries() -> dict[str, Entry]:
    load_plugins()
    return dict(_REGISTRY)


def default_specs() -> list[str]:
    return [e.name for e in entries().values() if e.default]


def resolve(specs: Sequence[str]) -> list[Method]:
    """Turn ``--methods`` strings into Method objects, in order, without duplicates."""
    table = entries()
    out: list[Method] = []
    seen: set[str] = set()
    for spec in specs:
        spec = spec.strip()
        if not spec:
            continue
        name, _, args = spec.partition(":")
        entry = table.get(name)
        if entry is None:
            known = ", ".join(sorted(table)) or "(none registered)"
            raise UnknownMethodError(f"unknown method {name!r} in {spec!r}; known methods: {known}")
        try:
            made = entry.factory(args or None)
        except (ValueError, TypeError) as e:
            raise MethodSpecError(f"bad method spec {spec!r}: {e}") from e
        for m in made if isinstance(made, list) else [made]:
            if m.name not in seen:
                seen.add(m.name)
                out.append(m)
    return out
