"""Bind the prelude's declarations to Python, refusing any disagreement.

The prelude is the contract between rules and Python.  The engine loads a
policy only if

* every declared ``fact`` has a Python binding and every binding is declared;
* each binding's signature -- derived from the ``@fact`` function's
  annotations (``spyre_rules.facts.registry``; a registry's ``signatures``) --
  has the prelude's parameter types and result type, and the Python function
  takes that many arguments;
* every ``extern record`` the engine or a fact builds has exactly the
  prelude's fields, in order;
* every ``config`` value names a setting of ``spyre_rules.config`` of that type.

Any problem raises :class:`BindingError` listing all of them at once (every
missing, extra and mistyped fact, each naming the fact and, for a type
mismatch, both signatures), so one run shows everything to fix.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from typing import Any

from spyre_rules.errors import SpyreRulesError
from spyre_rules.lang import types as T
from spyre_rules.lang.prelude import Vocabulary

__all__ = ["BindingError", "check_bindings", "parse_signature"]

_SIGNATURE = re.compile(r"^\((?P<params>.*)\)\s*->\s*(?P<result>\S+)$")


class BindingError(SpyreRulesError):
    """The prelude and the Python facts disagree; the message lists every mismatch."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("the prelude and its Python bindings disagree:\n  " + "\n  ".join(problems))
        self.problems = problems


def parse_signature(text: str, vocab: Vocabulary) -> tuple[list[tuple[str, T.Type]], T.Type]:
    """``"(op: Op, dim: int) -> int?"`` -> ([("op", Op), ("dim", int)], int?)."""
    m = _SIGNATURE.match(text.strip())
    if m is None:
        raise ValueError(f"malformed signature {text!r}")
    params = []
    for part in filter(None, (p.strip() for p in m.group("params").split(","))):
        name, _, spelling = part.partition(":")
        params.append((name.strip(), vocab.parse_spelling(spelling.strip())))
    return params, vocab.parse_spelling(m.group("result"))


def _python_arity(fn: Callable) -> int | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = {p.kind for p in sig.parameters.values()}
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return None
    return sum(1 for p in sig.parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def _facts(vocab: Vocabulary, facts: dict[str, Callable], signatures: dict[str, str]) -> list[str]:
    problems = []
    for name in sorted(set(vocab.facts) - set(facts)):
        problems.append(f"fact `{name}` is declared in the prelude but has no Python binding")
    for name in sorted(set(facts) - set(vocab.facts)):
        problems.append(f"Python binding `{name}` is not declared as a fact in the prelude")
    for name in sorted(set(vocab.facts) & set(facts)):
        declared = vocab.facts[name]
        text = signatures.get(name)
        if text is None:
            problems.append(f"Python binding `{name}` has no signature (define it with @fact)")
            continue
        try:
            params, result = parse_signature(text, vocab)
        except ValueError as exc:
            problems.append(f"Python binding `{name}`: {exc}")
            continue
        want = f"{declared.signature()}"
        have = f"{name}({', '.join(f'{n}: {t}' for n, t in params)}) -> {result}"
        types_have = [t for _, t in params] + [result]
        types_want = [t for _, t in declared.params] + [declared.result]
        if T.ERROR in types_have or types_have != types_want:
            problems.append(f"fact `{name}`: the prelude declares `{want}`, the Python binding `{have}`")
        arity = _python_arity(facts[name])
        if arity is not None and arity != len(declared.params):
            problems.append(f"fact `{name}` takes {len(declared.params)} argument(s) in the prelude, "
                            f"its Python function {arity}")
    return problems


def _records(vocab: Vocabulary, records: dict[str, type]) -> list[str]:
    problems = []
    for name, info in vocab.records.items():
        if not info.extern:
            continue
        cls = records.get(name)
        if cls is None:
            problems.append(f"extern record `{name}` has no Python class that builds it")
            continue
        have = [f.name for f in dataclasses.fields(cls)]
        want = list(info.fields)
        if have != want:
            problems.append(f"extern record `{name}`: the prelude declares fields {want}, "
                            f"the Python class {cls.__qualname__} has {have}")
    return problems


def _config(vocab: Vocabulary, settings: dict[str, Any]) -> list[str]:
    problems = []
    kinds = {bool: T.BOOL, int: T.INT, str: T.STR}
    for name, info in vocab.config.items():
        setting = settings.get(name)
        if setting is None:
            problems.append(f"config value `{name}` is not a setting of spyre_rules.config")
            continue
        # A setting's language type is the type of its default; a setting without
        # one (None: it may be unset) has none, so no declaration can match it.
        have = kinds.get(type(setting.default))
        if have is None:
            problems.append(f"config value `{name}` is declared `{info.type}`, but the setting may be unset "
                            "(no default); rules can read only int, bool and str settings that always "
                            "have a value")
        elif have != info.type:
            problems.append(f"config value `{name}` is declared `{info.type}`, the setting is `{have}`")
    return problems


def check_bindings(vocab: Vocabulary, facts: dict[str, Callable], signatures: dict[str, str],
                   records: dict[str, type], settings: dict[str, Any]) -> None:
    """Raise :class:`BindingError` unless the prelude and Python agree."""
    problems = _facts(vocab, facts, signatures) + _records(vocab, records) + _config(vocab, settings)
    if problems:
        raise BindingError(problems)
