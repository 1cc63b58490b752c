"""What a kernel family is: a knob space, validity rules and ``render(knobs) -> source``.

Knobs come in two kinds. *Compile-time* knobs change the rendered source (a new build);
*runtime* knobs are passed to ``hgemm_run`` in ``opts`` and share one binary. Both are result
columns. A method spec names a family and some knobs, ``<family>:k=v,k=v``; knobs not named
take the family's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem

# The H200's SM count: what runtime options sized to the device assume where none is given (the CPU
# tests, the learner's features); a kernel launch passes its device's own count.
DEFAULT_SMS = 132
SMEM_LIMIT = 227 * 1024  # opt-in dynamic shared memory per block on sm_90


class KnobError(ValueError):
    """A spec names an unknown knob, a value outside its space, or an invalid combination."""


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple  # the allowed values, in search order
    default: Any
    runtime: bool = False  # passed in opts (same binary) rather than rendered
    help: str = ""


def template(name: str) -> str:
    """Text of ``kernels_search/templates/<name>``."""
    return (Path(__file__).parent / "templates" / name).read_text()


@dataclass
class Family:
    """Base class; subclasses define ``knobs``, ``check``, ``render_body`` and ``opts``."""

    name: str = ""
    knobs: tuple[Knob, ...] = field(default_factory=tuple)
    backend: str = "cuda"  # "cuda": rendered to an hgemm C-ABI library; "triton": Python-side
    # configs measured to win somewhere (knob specs, e.g. "bm=32:bn=64"): the search's initial
    # design measures them on every shape first (kernels_search.search.learner)
    presets: tuple[str, ...] = ()

    # ---- knob handling ---------------------------------------------------------------------
    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KnobError(f"{self.name}: unknown knob {name!r}; knobs: {', '.join(k.name for k in self.knobs)}")

    def defaults(self) -> dict[str, Any]:
        return {k.name: k.default for k in self.knobs}

    def preset_configs(self) -> list[dict[str, Any]]:
        """``presets`` as full, validated knob dicts (a bad preset raises KnobError)."""
        return [self.parse(p) for p in self.presets]

    def complete(self, knobs: Mapping[str, Any]) -> dict[str, Any]:
        """Knobs as recorded (e.g. in a kernel DB), with any knob the family gained since filled
        with its default (a new knob's default is the behaviour the family had before it) and
        any knob it no longer has dropped."""
        full = self.defaults()
        full.update({k: v for k, v in knobs.items() if k in full})
        return full

    def compile_knobs(self, knobs: Mapping[str, Any]) -> dict[str, Any]:
        return {k.name: knobs[k.name] for k in self.knobs if not k.runtime}

    def parse(self, spec: str | None) -> dict[str, Any]:
        """``"bm=64,bn=32"`` -> full knob dict (defaults filled in), validated.

        ``:`` separates knobs too (``bm=64:bn=32``), for command lines that split method lists on
        commas.
        """
        knobs = self.defaults()
        for part in (spec or "").replace(":", ",").split(","):
            part = part.strip()
            if not part:
                continue
            key, sep, raw = part.partition("=")
            if not sep:
                raise KnobError(f"{self.name}: expected k=v, got {part!r}")
            k = self.knob(key.strip())
            knobs[k.name] = _coerce(raw.strip(), k)
        self.validate(knobs)
        return knobs

    def validate(self, knobs: Mapping[str, Any]) -> None:
        """Raise KnobError unless every knob is in its space and ``check`` accepts the set."""
        for k in self.knobs:
            if k.name not in knobs:
                raise KnobError(f"{self.name}: knob {k.name!r} missing")
            if knobs[k.name] not in k.values:
                raise KnobError(f"{self.name}: {k.name}={knobs[k.name]!r} not in {list(k.values)}")
        extra = set(knobs) - {k.name for k in self.knobs}
        if extra:
            raise KnobError(f"{self.name}: unknown knobs {sorted(extra)}")
        reason = self.check(knobs)
        if reason:
            raise KnobError(f"{self.name}: {reason}")

    def is_valid(self, knobs: Mapping[str, Any]) -> Support:
        try:
            self.validate(knobs)
        except KnobError as e:
            return unsupported(str(e))
        return SUPPORTED

    def spec(self, knobs: Mapping[str, Any]) -> str:
        """Canonical ``family:k=v,...`` (every knob, in declaration order): the method name."""
        return f"{self.name}:" + ",".join(f"{k.name}={knobs[k.name]}" for k in self.knobs)

    # ---- what subclasses provide -------------------------------------------------------------
    def check(self, knobs: Mapping[str, Any]) -> str:
        """Validity rules beyond each knob's space: '' when valid, else the reason."""
        return ""

    def render(self, knobs: Mapping[str, Any]) -> str:
        """Complete, self-contained CUDA source for the compile-time knobs."""
        raise NotImplementedError

    def extra_flags(self, knobs: Mapping[str, Any]) -> tuple[str, ...]:
        return ()

    def extra_key(self, knobs: Mapping[str, Any]) -> str:
        return ""

    def supports(self, knobs: Mapping[str, Any], problem: Problem) -> Support:
        return SUPPORTED

    def opts(self, knobs: Mapping[str, Any], problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        """The runtime options passed to ``hgemm_run`` for this problem; ``sms``, the device's SM
        count, is for options sized to the device (hopper's one-wave slice count)."""
        return []


def _coerce(raw: str, knob: Knob) -> Any:
    for v in knob.values:
        if str(v) == raw:
            return v
    raise KnobError(f"{knob.name}={raw!r} not in {list(knob.values)}")


def render_defines(defines: Mapping[str, Any]) -> str:
    return "".join(f"#define {k} {int(v) if isinstance(v, bool) else v}\n" for k, v in defines.items())


def cuda_source(header_comment: str, defines: Mapping[str, Any], body_template: str, parts: Sequence[str] = ()) -> str:
    """ABI header + knob #defines + shared ``parts`` (template headers, verbatim: a build's key and source hash
    cover them) + body: one self-contained translation unit."""
    return (
        f"// {header_comment}\n"
        + template("hgemm_abi.cuh")
        + "\n// ---- knobs ----\n"
        + render_defines(defines)
        + "\n"
        + "".join(template(part) + "\n" for part in parts)
        + template(body_template)
    )


class FamilyMethod:
    """What every Method made from one family config shares: the canonical spec is its name and
    every knob is a config column. Backends (nvcc library, Triton) add how it runs."""

    is_baseline = False
    devices = ("cuda",)

    def __init__(self, family: Family, knobs: Mapping[str, Any]):
        family.validate(knobs)
        self._family = family
        self.knobs = dict(knobs)
        self.family = family.name
        self.name = family.spec(self.knobs)
        self.config = dict(self.knobs)
