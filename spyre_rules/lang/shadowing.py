"""Rules that can never fire (in the spirit of ISLE's shadowed-rule check).

In a first-match section (eligibility, legality guards, search guards,
grouping) a rule is dead when

* an earlier rule is unconditional (no ``when``, or a guard that folds to
  true) -- W003;
* its own guard folds to false -- W006;
* its guard implies an earlier rule's guard (identical, or a conjunction that
  contains it, or ...), so whenever it would fire the earlier one fires
  first -- W004.

Requirements (legality, validation) run in order and stop at the first that
fails; a requirement implied by an earlier one can never be that first
failure -- W004.

Implication is decided structurally and conservatively: two expressions are
the same when they are the same tree up to spans; ``and``/``or`` are
flattened.  A missed implication only means a missed warning.

Comparing every rule with every earlier one is quadratic, so one section may
spend at most :data:`MAX_COMPARISONS` steps on it; a section that needs more
(thousands of rules) gets W007 at the rule where the comparison stopped.
"""

from __future__ import annotations

from spyre_rules.lang import ast as A

MAX_COMPARISONS = 50_000  # implication steps per section
_TRUE = ("bool", True)
_FALSE = ("bool", False)


def canon(e):
    """A hashable structural form of an expression (spans dropped, and/or flattened)."""
    if isinstance(e, A.Binary) and e.op in ("and", "or"):
        parts = frozenset(canon(x) for x in _flatten(e, e.op))
        return (e.op, parts)
    if isinstance(e, A.Num):
        return ("num", e.digits, e.unit.name if e.unit else None)
    if isinstance(e, A.Str):
        return ("str", e.value)
    if isinstance(e, A.Bool):
        return ("bool", e.value)
    if isinstance(e, A.Name):
        return ("name", e.id)
    if isinstance(e, A.ConfigRef):
        return ("config", e.name.name)
    if isinstance(e, A.Field):
        return ("field", canon(e.obj), e.name.name)
    if isinstance(e, A.Call):
        return ("call", e.func.name, tuple(canon(a) for a in e.args))
    if isinstance(e, A.Comprehension):
        return ("comp", e.kind, canon(e.elt),
                tuple((c.var.name, canon(c.iter), tuple(canon(x) for x in c.conds)) for c in e.clauses))
    if isinstance(e, A.RecordCtor):
        return ("record", e.type_name.name, tuple(sorted((f.name.name, canon(f.value)) for f in e.fields)))
    if isinstance(e, (A.TupleExpr, A.ListExpr, A.SetExpr)):
        return (type(e).__name__, tuple(canon(i) for i in e.items))
    if isinstance(e, A.Unary):
        return ("unary", e.op, canon(e.operand))
    if isinstance(e, A.IsKnown):
        return ("known", e.known, canon(e.operand))
    if isinstance(e, A.Binary):
        return ("bin", e.op, canon(e.left), canon(e.right))
    return ("?", id(e))


def _flatten(e, op: str) -> list:
    out = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Binary) and x.op == op:
            stack.append(x.right)
            stack.append(x.left)
        else:
            out.append(x)
    return out


def implies(a, b, _memo=None) -> bool:
    """Does ``a`` (canonical form) imply ``b``?  Sound, not complete."""
    if _memo is None:
        _memo = {}
    key = (a, b)
    if key in _memo:
        return _memo[key]
    _memo[key] = False  # guards against cycles; canonical forms are finite trees
    result = (
        a == b
        or b == _TRUE
        or a == _FALSE
        or (b[0] == "or" and any(implies(a, d, _memo) for d in b[1]))
        or (a[0] == "and" and any(implies(c, b, _memo) for c in a[1]))
        or (a[0] == "or" and all(implies(d, b, _memo) for d in a[1]))
        or (b[0] == "and" and all(implies(a, c, _memo) for c in b[1]))
    )
    _memo[key] = result
    return result


def analyse_section(sec: A.Section, spec, checker) -> None:
    if checker.too_deep:  # structural comparison of a too-deep tree could exhaust the stack
        return
    if spec.first_match:
        _first_match([i for i in sec.items if isinstance(i, A.Decision)], checker)
    _requirements([i for i in sec.items if isinstance(i, A.Require)], checker)


class _Budget:
    """Implication steps left for one section; reports W007 once when spent."""

    def __init__(self, checker) -> None:
        self.left = MAX_COMPARISONS
        self.checker = checker

    def implies(self, a, b, at) -> bool | None:
        """``implies(a, b)``, or None once the budget is spent."""
        if self.left <= 0:
            return None
        memo: dict = {}
        result = implies(a, b, memo)
        self.left -= len(memo)
        if self.left <= 0:
            self.checker.error("W007", f"too many rules to compare in this section: rules from here on were "
                               f"not checked for shadowing (limit {MAX_COMPARISONS} comparison steps)", at)
        return result


def _fold(e, checker):
    value = checker.const_fold(e)
    return value if isinstance(value, bool) else None


def _first_match(rules: list[A.Decision], checker) -> None:
    budget = _Budget(checker)
    always: A.Decision | None = None
    earlier: list[tuple[A.Decision, tuple]] = []
    for rule in rules:
        name = rule.name.name
        if always is not None:
            checker.error("W003", f"rule `{name}` can never fire: rule `{always.name.name}` before it always fires",
                          rule.name.span, f"note: `{always.name.name}` is at {_where(always.name.span)}")
            continue
        if rule.guard is None or _fold(rule.guard, checker) is True:
            always = rule
            continue
        if _fold(rule.guard, checker) is False:
            checker.error("W006", f"rule `{name}` can never fire: its guard is always false", rule.guard.span)
            continue
        if budget.left <= 0:
            continue
        mine = canon(rule.guard)
        for prev, theirs in earlier:
            if budget.implies(mine, theirs, rule.name.span):
                same = mine == theirs
                checker.error(
                    "W004",
                    f"rule `{name}` can never fire: " + (
                        f"its guard is the same as rule `{prev.name.name}`'s" if same else
                        f"whenever its guard holds, the guard of rule `{prev.name.name}` holds too"),
                    rule.guard.span, f"note: `{prev.name.name}` is at {_where(prev.name.span)} and fires first")
                break
        else:
            earlier.append((rule, mine))


def _requirements(reqs: list[A.Require], checker) -> None:
    budget = _Budget(checker)
    earlier: list[tuple[A.Require, tuple]] = []
    for req in reqs:
        if budget.left <= 0:
            break
        mine = canon(req.cond)
        for prev, theirs in earlier:
            if budget.implies(theirs, mine, req.name.span):
                same = mine == theirs
                checker.error(
                    "W004",
                    f"requirement `{req.name.name}` can never be the one that fails: " + (
                        f"it repeats `{prev.name.name}`" if same else
                        f"it holds whenever `{prev.name.name}` (checked before it) holds"),
                    req.cond.span, f"note: `{prev.name.name}` is at {_where(prev.name.span)}")
                break
        else:
            earlier.append((req, mine))


def _where(span: A.Span) -> str:
    return f"{span.file}:{span.line}:{span.col}"
