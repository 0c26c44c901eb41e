"""Which rules of a policy the tests made fire (``spyre-rules test --coverage``).

A *rule* is every item of a section that can decide or shape a decision
(``let`` bindings are not rules).  When it counts as exercised, read from the
engine's trace steps (docs/policy_tests.md, "Coverage"):

* eligibility / grouping / restickify / layout_choice rules, legality and search ``reject`` guards: the rule fired;
* a candidates generator: it emitted a candidate;
* a legality ``require``: it rejected some split count; ``splits``: a dim's splits were listed;
  ``otherwise splits``: its fallback counts were tried (no ``splits`` count above 1 was legal);
* a validation ``require``: it rejected some tiling;
* search ``order``: dims were ordered; ``required``, ``cost`` and the ``bound``\\ s:
  split counts were kept and combinations formed; ``exhausted``: the search gave up;
* collectives ``cost`` and ``bound``: a collective step's chunkings were scanned and weighed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from spyre_rules.lang import ast as A

__all__ = ["PolicyRule", "policy_rules", "exercised", "uncovered"]


@dataclasses.dataclass(frozen=True)
class PolicyRule:
    section: str
    kind: str        # skip, reject, require, generator, splits, bound, order, ...
    name: str
    file: str
    line: int

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.section, self.kind, self.name)

    def text(self) -> str:
        return f"{self.file}:{self.line}: {self.section}.{self.name} ({self.kind})"


def _item(section: str, item: Any) -> PolicyRule | None:
    span = item.span
    if isinstance(item, A.Decision):
        kind = "guard" if section in ("legality", "search") else item.action.name
        return PolicyRule(section, kind, item.name.name, span.file, span.line)
    if isinstance(item, A.Require):
        return PolicyRule(section, "require", item.name.name, span.file, span.line)
    if isinstance(item, A.SplitsItem) and item.fallback:
        return PolicyRule(section, "otherwise splits", "otherwise splits", span.file, span.line)
    if isinstance(item, A.Generator):
        return PolicyRule(section, "generator", item.name.name, span.file, span.line)
    simple = {A.SplitsItem: "splits", A.OrderItem: "order", A.RequiredItem: "required",
              A.CostItem: "cost", A.ExhaustedItem: "exhausted"}
    for cls, kind in simple.items():
        if isinstance(item, cls):
            return PolicyRule(section, kind, kind, span.file, span.line)
    if isinstance(item, A.BoundItem):
        return PolicyRule(section, "bound", item.name.name, span.file, span.line)
    return None  # let


def policy_rules(sections: dict[str, A.Section]) -> list[PolicyRule]:
    """Every rule of a checked policy, in file order."""
    out = []
    for kind, sec in sections.items():
        for item in sec.items:
            rule = _item(kind, item)
            if rule is not None:
                out.append(rule)
    return sorted(out, key=lambda r: (r.file, r.line))


def exercised(steps: Iterable[Any]) -> set[tuple[str, str, str]]:
    """Keys (section, kind, name) of the rules the trace steps show firing."""
    fired: set[tuple[str, str, str]] = set()
    searched = False
    for s in steps:
        sec, rule, outcome = s.section, s.rule, s.outcome
        if sec in ("eligibility", "grouping", "restickify", "layout_choice"):
            fired.add((sec, outcome, rule))
        elif sec == "candidates" and outcome == "emit":
            fired.add((sec, "generator", rule))
        elif sec == "legality" and rule == "splits":
            fired.add((sec, "splits", "splits"))
            if s.values.get("fallback"):
                fired.add((sec, "otherwise splits", "otherwise splits"))
            for entry in s.values.get("rejected", ()):
                fired.add((sec, "require", str(entry).split(": ", 1)[-1]))
        elif sec == "legality":
            fired.add((sec, "guard", rule))
        elif sec == "validation" and outcome == "fail":
            fired.add((sec, "require", rule))
        elif sec == "search":
            if rule == "order":
                fired.add((sec, "order", "order"))
            elif rule == "required":
                searched = True
            elif rule == "exhausted":
                fired.add((sec, "exhausted", "exhausted"))
            else:
                fired.add((sec, "guard", rule))
        elif sec == "collectives" and rule == "cost":
            fired.update({(sec, "cost", "cost"), (sec, "bound", "*")})
    if searched:
        fired.update({("search", "required", "required"), ("search", "cost", "cost")})
        fired.add(("search", "bound", "*"))
    return fired


def uncovered(rules: list[PolicyRule], fired: set[tuple[str, str, str]]) -> list[PolicyRule]:
    def hit(rule: PolicyRule) -> bool:
        if rule.kind == "bound":
            return (rule.section, "bound", "*") in fired
        return rule.key in fired

    return [r for r in rules if not hit(r)]
