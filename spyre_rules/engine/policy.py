"""Load a policy once: read, check, bind the facts, compile.

Which rules: ``config.rules_path`` (``SPYRE_RULES_PATH``) -- a directory, or
``os.pathsep``-separated ``.rules`` files -- replaces the bundled ``rules/``;
unset means the bundled rules.  A policy is loaded, checked, bound and
compiled once per rules path and then reused for every op (:func:`get_policy`).

Loading refuses, with the reason:
* a policy with check errors -> ``PolicyError`` (carries the diagnostics; its
  message prints them as ``spyre-rules check`` would);
* a prelude that disagrees with the Python facts -> ``BindingError``.

Which facts: the bundled registry ``spyre_rules.facts.op_facts.REGISTRY``,
unless ``load_policy(paths, facts=registry)`` is given another
``FactRegistry`` -- the extension point for facts defined outside the package
(e.g. ``registry = REGISTRY.extended()`` then ``@registry.fact``).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

from spyre_rules.config import SETTINGS, config
from spyre_rules.engine.binding import check_bindings
from spyre_rules.engine.program import Program, compile_program
from spyre_rules.engine.values import ENGINE_RECORDS
from spyre_rules.lang.driver import PolicyError, load_policy as check_policy

__all__ = ["Policy", "PolicyError", "get_policy", "load_policy", "clear_policy_cache", "rules_paths"]


@dataclasses.dataclass
class Policy:
    """A loaded policy: its files, constants and compiled sections."""

    source: str                 # what was loaded ("bundled rules/" or the rules path)
    files: list[str]
    consts: dict[str, Any]
    config_names: tuple[str, ...]
    program: Program

    def config_snapshot(self, **overrides: Any) -> dict[str, Any]:
        """Current values of every config value the prelude declares (read once per
        plan, so one op's decision sees one consistent configuration)."""
        values = {name: getattr(config, name) for name in self.config_names}
        values.update(overrides)
        return values


def rules_paths(rules_path: str | None = None) -> list[str] | None:
    """The paths ``config.rules_path`` names (None: the bundled rules)."""
    raw = config.rules_path if rules_path is None else rules_path
    if not raw:
        return None
    return [p for p in raw.split(os.pathsep) if p]


def _fact_records() -> dict[str, type]:
    from spyre_rules.facts.records import Coord, HostCoord, Read

    return {"Read": Read, "Coord": Coord, "HostCoord": HostCoord, **ENGINE_RECORDS}


def load_policy(paths: list[str] | None = None, facts: Any = None) -> Policy:
    """Load, check, bind and compile the policy at ``paths`` (uncached), binding the
    facts of ``facts`` (a ``FactRegistry``; default: the bundled one)."""
    from spyre_rules.facts import op_facts

    registry = op_facts.REGISTRY if facts is None else facts
    result = check_policy(paths)
    vocab, checker = result.vocab, result.checker
    extern = _fact_records()
    check_bindings(vocab, registry.functions, registry.signatures, extern, SETTINGS)
    # Plain records are built by the rules: one frozen dataclass per declaration.
    records = dict(extern)
    for name, info in vocab.records.items():
        if not info.extern:
            records[name] = dataclasses.make_dataclass(name, list(info.fields), frozen=True)
    consts = {name: info.value for name, info in checker.consts.items() if info.ok}
    program = compile_program(checker.sections, registry.functions, records, checker.resolved)
    return Policy(
        source="bundled rules/" if not paths else os.pathsep.join(paths),
        files=list(result.names),
        consts=consts,
        config_names=tuple(vocab.config),
        program=program,
    )


_CACHE: dict[tuple[str, ...] | None, Policy] = {}
_LOCK = threading.Lock()


def get_policy(rules_path: str | None = None) -> Policy:
    """The policy for ``rules_path`` (default: ``config.rules_path``), loaded once."""
    paths = rules_paths(rules_path)
    key = None if paths is None else tuple(os.path.abspath(p) for p in paths)
    policy = _CACHE.get(key)
    if policy is None:
        with _LOCK:
            policy = _CACHE.get(key)
            if policy is None:
                policy = _CACHE[key] = load_policy(paths)
    return policy


def clear_policy_cache() -> None:
    """Forget loaded policies (the next plan reloads the rules from disk)."""
    _CACHE.clear()
