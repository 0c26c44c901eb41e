"""Process-wide settings of spyre-rules.

Every setting has a default, an environment variable that overrides the
default, and can be overridden again in code with ``config.patch(...)`` (a
context manager and decorator).  Environment variables are read at the moment
a setting is read, so a test that sets one with ``monkeypatch.setenv`` sees it
at once.

Hardware facts (``max_span_bytes``, ``sencores``) live here; *policy* numbers
(tiling bounds, caps, cost orders) do not: they are named constants in
``rules/``.

This module must not import torch: ``spyre-rules check`` reads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from typing import Any


class ConfigError(ValueError):
    """A setting was given a value it cannot take (names the setting and value)."""


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected 0/1/true/false, got {text!r}")


def _parse_positive_int(text: str) -> int:
    value = int(text.strip(), 0)
    if value <= 0:
        raise ValueError(f"expected a positive integer, got {text!r}")
    return value


def _parse_optional_str(text: str) -> str | None:
    return text or None


def _parse_fallback(text: str) -> str:
    value = text.strip().lower()
    if value not in ("eager", "error"):
        raise ValueError(f"expected 'eager' or 'error', got {text!r}")
    return value


def _parse_span_check(text: str) -> str:
    value = text.strip().lower()
    if value not in ("warn", "error", "off"):
        raise ValueError(f"expected 'warn', 'error' or 'off', got {text!r}")
    return value


def _parse_bundle_mlir_form(text: str) -> str:
    value = text.strip().lower()
    if value not in ("custom", "generic"):
        raise ValueError(f"expected 'custom' or 'generic', got {text!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    env: str | None
    default: Any
    parse: Callable[[str], Any]
    doc: str


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting("max_span_bytes", "SPYRE_MAX_SPAN_BYTES", 256 * 1024 * 1024, _parse_positive_int,
                "Largest memory-address span one core may touch (bytes)."),
        Setting("sencores", "SENCORES", 32, _parse_positive_int,
                "Number of Spyre cores work division may use."),
        Setting("ignore_span_overflow_hints", "SPYRE_INDUCTOR_IGNORE_SPAN_OVERFLOW_HINTS", True,
                _parse_bool, "Skip automatic span-overflow tiling (on by default: the pass is opt-in)."),
        Setting("ignore_wsr_hints", "SPYRE_INDUCTOR_IGNORE_WSR_HINTS", False, _parse_bool,
                "Ignore working-set-reduction hints (also suppresses automatic tiling)."),
        Setting("coarse_tiling", "SPYRE_RULES_COARSE_TILING", True, _parse_bool,
                "Apply coarse-tile groups (user hints and automatic plans)."),
        Setting("rules_path", "SPYRE_RULES_PATH", None, _parse_optional_str,
                "Directory or os.pathsep-separated .rules files replacing the bundled rules."),
        Setting("dump_dir", "SPYRE_RULES_DUMP_DIR", None, _parse_optional_str,
                "Folder receiving wrapper.py, plan.json, sdsc_N.json and bundle.mlir per graph."),
        Setting("unroll_loops", "SPYRE_RULES_UNROLL_LOOPS", False, _parse_bool,
                "Emit counted loops unrolled instead of compact scf.for loops."),
        Setting("fallback", "SPYRE_RULES_FALLBACK", "eager", _parse_fallback,
                "What to do with a graph that cannot be compiled: 'eager' (warn) or 'error'."),
        Setting("max_specializations", "SPYRE_RULES_MAX_SPECIALIZATIONS", 8, _parse_positive_int,
                "Static programs one graph with symbolic sizes may compile (one per concrete "
                "shape); a call with new sizes past it follows 'fallback'."),
        Setting("span_check", "SPYRE_RULES_SPAN_CHECK", "warn", _parse_span_check,
                "Generated accesses over max_span_bytes: 'warn' (warning + log), 'error' "
                "(raise before anything runs) or 'off'."),
        Setting("lx_planning", "SPYRE_RULES_LX_PLANNING", False, _parse_bool,
                "Place loop-internal per-tile buffers in the LX scratchpad when they fit."),
        Setting("lx_capacity_bytes", "SPYRE_RULES_LX_CAPACITY_BYTES", 2 * 1024 * 1024,
                _parse_positive_int, "Per-core LX scratchpad capacity (bytes)."),
        Setting("bundle_mlir_form", "SPYRE_RULES_BUNDLE_MLIR_FORM", "custom", _parse_bundle_mlir_form,
                "How bundle.mlir prints sdscbundle.sdsc_execute: 'custom' (the dialect's own "
                "syntax, for toolchains that register it) or 'generic' (MLIR's generic op form, "
                "which any MLIR parser accepts with unregistered dialects allowed)."),
    ]
}

_UNSET = object()


class _Config:
    """Attribute access to the settings; ``patch`` overrides them temporarily."""

    def __init__(self) -> None:
        object.__setattr__(self, "_overrides", [])

    def __getattr__(self, name: str) -> Any:
        setting = SETTINGS.get(name)
        if setting is None:
            raise AttributeError(f"spyre_rules.config has no setting {name!r}")
        for layer in reversed(self._overrides):
            if name in layer:
                return layer[name]
        if setting.env is not None:
            raw = os.environ.get(setting.env)
            if raw is not None:
                try:
                    return setting.parse(raw)
                except ValueError as exc:
                    raise ConfigError(
                        f"environment variable {setting.env}={raw!r} is invalid for "
                        f"setting {name!r}: {exc}"
                    ) from None
        return setting.default

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("use spyre_rules.config.patch(...) to change settings")

    def _validated(self, changes: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, value in changes.items():
            setting = SETTINGS.get(name)
            if setting is None:
                raise ConfigError(f"unknown setting {name!r}; known: {', '.join(sorted(SETTINGS))}")
            if setting.parse is not _parse_optional_str:
                # Python values are checked by the parser of their text, so
                # patch(max_span_bytes=-1) fails like SPYRE_MAX_SPAN_BYTES=-1 does.
                try:
                    value = setting.parse(value if isinstance(value, str) else str(value))
                except ValueError as exc:
                    raise ConfigError(f"invalid value {value!r} for setting {name!r}: {exc}") from None
            out[name] = value
        return out

    def patch(self, changes: dict[str, Any] | None = None, **kwargs: Any) -> "_Patch":
        merged = dict(changes or {})
        merged.update(kwargs)
        return _Patch(self, self._validated(merged))

    def snapshot(self) -> dict[str, Any]:
        """The effective value of every setting (for dumps and reports)."""
        return {name: getattr(self, name) for name in SETTINGS}


class _Patch(contextlib.ContextDecorator):
    def __init__(self, cfg: _Config, changes: dict[str, Any]) -> None:
        self._cfg = cfg
        self._changes = changes

    def __enter__(self) -> "_Patch":
        self._cfg._overrides.append(self._changes)
        return self

    def __exit__(self, *exc: object) -> None:
        # Remove our own layer even if patches were exited out of order.
        layers = self._cfg._overrides
        for i in range(len(layers) - 1, -1, -1):
            if layers[i] is self._changes:
                del layers[i]
                break


config = _Config()


def patch(changes: dict[str, Any] | None = None, **kwargs: Any) -> _Patch:
    return config.patch(changes, **kwargs)


def snapshot() -> dict[str, Any]:
    return config.snapshot()


def __getattr__(name: str) -> Any:
    # ``spyre_rules.config.max_span_bytes`` reads the live setting.
    return getattr(config, name)


__all__ = ["config", "patch", "snapshot", "ConfigError", "SETTINGS"]
