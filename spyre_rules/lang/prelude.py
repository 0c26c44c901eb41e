"""The fact vocabulary: declarations of the prelude, resolved to types.

Declarations (``extern type``, ``record``, ``fact``, ``config``) live only in a
prelude file (a file named ``prelude.rules``).  This module turns them into a
:class:`Vocabulary` the checker type-checks against and the engine binds to
Python.  It never imports torch.
"""

from __future__ import annotations

import keyword

from spyre_rules.lang import ast as A
from spyre_rules.lang import types as T
from spyre_rules.lang.builtins import BUILTINS
from spyre_rules.lang.diagnostics import Diagnostic
from spyre_rules.lang.sections import REQUIRED_FIELDS, REQUIRED_TYPES
from spyre_rules.lang.slotted import Plain
from spyre_rules.lang.templates import is_reserved_name

class RecordInfo(Plain):
    __slots__ = _fields = ("name", "extern", "fields", "decl")
    name: str
    extern: bool
    fields: dict[str, T.Type]
    decl: A.RecordDecl

    def __init__(self, name: str, extern: bool, fields: dict[str, T.Type], decl: A.RecordDecl) -> None:
        self.name, self.extern, self.fields, self.decl = name, extern, fields, decl


class FactInfo(Plain):
    __slots__ = _fields = ("name", "params", "result", "decl")
    name: str
    params: list[tuple[str, T.Type]]
    result: T.Type
    decl: A.FactDecl

    def __init__(self, name: str, params: list[tuple[str, T.Type]], result: T.Type, decl: A.FactDecl) -> None:
        self.name, self.params, self.result, self.decl = name, params, result, decl

    def signature(self) -> str:
        params = ", ".join(f"{n}: {t}" for n, t in self.params)
        return f"{self.name}({params}) -> {self.result}"


class ConfigInfo(Plain):
    __slots__ = _fields = ("name", "type", "decl")
    name: str
    type: T.Type
    decl: A.ConfigDecl

    def __init__(self, name: str, type: T.Type, decl: A.ConfigDecl) -> None:  # noqa: A002 - the field's name
        self.name, self.type, self.decl = name, type, decl


class Vocabulary(Plain):
    __slots__ = _fields = ("opaque", "records", "facts", "config")
    opaque: dict[str, A.TypeDecl]
    records: dict[str, RecordInfo]
    facts: dict[str, FactInfo]
    config: dict[str, ConfigInfo]

    def __init__(self, opaque: dict[str, A.TypeDecl] | None = None, records: dict[str, RecordInfo] | None = None,
                 facts: dict[str, FactInfo] | None = None, config: dict[str, ConfigInfo] | None = None) -> None:
        self.opaque = {} if opaque is None else opaque
        self.records = {} if records is None else records
        self.facts = {} if facts is None else facts
        self.config = {} if config is None else config

    def type_named(self, name: str) -> T.Type | None:
        if name in T.PRIMITIVES:
            return T.PRIMITIVES[name]
        if name in self.records:
            return T.RecordT(name)
        if name in self.opaque:
            return T.Opaque(name)
        return None

    def parse_spelling(self, spelling: str) -> T.Type:
        """Type of a spelling used in the section tables ("Plan?", "set[str]");
        ERROR if the prelude lacks it (already reported as E015)."""
        if spelling.endswith("?"):
            inner = self.parse_spelling(spelling[:-1])
            return T.ERROR if inner is T.ERROR else T.OptT(inner)
        if spelling.endswith("]"):
            head, _, rest = spelling.partition("[")
            inner = self.parse_spelling(rest[:-1])
            return T.ERROR if inner is T.ERROR else T.GENERICS[head](inner)
        return self.type_named(spelling) or T.ERROR


class _Builder:
    def __init__(self, diags: list[Diagnostic]) -> None:
        self.diags = diags
        self.vocab = Vocabulary()
        self.type_spans: dict[str, A.Span] = {}

    def error(self, code: str, message: str, span: A.Span, *notes: str) -> None:
        self.diags.append(Diagnostic(code, message, span, list(notes)))

    def resolve(self, te: A.TypeExpr) -> T.Type:
        if isinstance(te, A.OptionalType):
            inner = self.resolve(te.inner)
            if isinstance(inner, T.OptT):
                self.error("E039", f"`{inner}?` is doubly optional; one `?` is enough", te.span)
                return inner
            return T.ERROR if inner is T.ERROR else T.OptT(inner)
        if isinstance(te, A.GenericType):
            ctor = T.GENERICS.get(te.name)
            if ctor is None:
                self.error("E039", f"`{te.name}[...]` is not a type; the collections are list[T] and set[T]",
                           te.span)
                return T.ERROR
            if len(te.args) != 1:
                self.error("E039", f"`{te.name}` takes exactly one element type, got {len(te.args)}", te.span)
                return T.ERROR
            inner = self.resolve(te.args[0])
            if isinstance(inner, T.OptT):
                self.error("E039", f"a {te.name} cannot hold values that may be unknown (`{inner}`)", te.span)
                return T.ERROR
            return T.ERROR if inner is T.ERROR else ctor(inner)
        found = self.vocab.type_named(te.name)
        if found is None:
            if te.name in T.GENERICS:
                self.error("E039", f"`{te.name}` needs an element type, e.g. `{te.name}[int]`", te.span)
            else:
                self.error("E014", f"unknown type `{te.name}`", te.span, *_suggest(te.name, self._type_names()))
            return T.ERROR
        return found

    def _type_names(self) -> list[str]:
        return [*T.PRIMITIVES, *self.vocab.records, *self.vocab.opaque]

    def declare_type(self, name: A.Ident) -> bool:
        if name.name in T.PRIMITIVES or name.name in T.GENERICS:
            self.error("E016", f"type `{name.name}` is built in and cannot be redeclared", name.span)
            return False
        if name.name in self.type_spans:
            self.error("E016", f"type `{name.name}` is already declared", name.span,
                       f"note: first declared at {_where(self.type_spans[name.name])}")
            return False
        self.type_spans[name.name] = name.span
        return True

    def build(self, files: list[A.SourceFile]) -> Vocabulary:
        decls = [(f, item) for f in files for item in f.items
                 if isinstance(item, (A.TypeDecl, A.RecordDecl, A.FactDecl, A.ConfigDecl))]
        for f, item in decls:
            if not f.is_prelude:
                self.error("E019", "declarations belong in the prelude (a file named prelude.rules)",
                           item.span)
        # 1. type names first, so records and facts may refer to types declared later
        records: list[A.RecordDecl] = []
        for _, item in decls:
            if isinstance(item, A.TypeDecl) and self.declare_type(item.name):
                self.vocab.opaque[item.name.name] = item
            elif isinstance(item, A.RecordDecl) and self.declare_type(item.name):
                self.vocab.records[item.name.name] = RecordInfo(item.name.name, item.extern, {}, item)
                records.append(item)
        # 2. record fields
        for rec in records:
            info = self.vocab.records[rec.name.name]
            for fd in rec.fields:
                if fd.name.name in info.fields:
                    self.error("E016", f"record `{rec.name.name}` already has a field `{fd.name.name}`",
                               fd.name.span)
                    continue
                if is_reserved_name(fd.name.name) or keyword.iskeyword(fd.name.name):
                    self.error("E041", f"field `{fd.name.name}` of record `{rec.name.name}` has a name reserved "
                               "by the implementation (`__x__` names and Python keywords); rename it",
                               fd.name.span)
                    continue
                info.fields[fd.name.name] = self.resolve(fd.type)
        # 3. facts and config values
        for _, item in decls:
            if isinstance(item, A.FactDecl):
                self._fact(item)
            elif isinstance(item, A.ConfigDecl):
                self._config(item)
        return self.vocab

    def _fact(self, item: A.FactDecl) -> None:
        name = item.name.name
        if name in BUILTINS:
            self.error("E016", f"`{name}` is a builtin function and cannot be declared as a fact",
                       item.name.span)
            return
        if name in self.vocab.facts:
            self.error("E016", f"fact `{name}` is already declared", item.name.span,
                       f"note: first declared at {_where(self.vocab.facts[name].decl.name.span)}")
            return
        params: list[tuple[str, T.Type]] = []
        for p in item.params:
            if any(p.name.name == n for n, _ in params):
                self.error("E016", f"fact `{name}` already has a parameter `{p.name.name}`", p.name.span)
            params.append((p.name.name, self.resolve(p.type)))
        self.vocab.facts[name] = FactInfo(name, params, self.resolve(item.result), item)

    def _config(self, item: A.ConfigDecl) -> None:
        name = item.name.name
        if name in self.vocab.config:
            self.error("E016", f"config value `{name}` is already declared", item.name.span,
                       f"note: first declared at {_where(self.vocab.config[name].decl.name.span)}")
            return
        t = self.resolve(item.type)
        if t not in (T.INT, T.BOOL, T.STR, T.ERROR):
            self.error("E039", f"config value `{name}` must be an int, bool or str, not `{t}`", item.type.span)
            t = T.ERROR
        self.vocab.config[name] = ConfigInfo(name, t, item)

    def requirements(self, anchor: A.Span) -> None:
        missing = []
        for name, kind in REQUIRED_TYPES.items():
            t = self.vocab.type_named(name)
            if t is None:
                missing.append(f"`{name}` ({kind})")
                continue
            if kind == "extern type" and not isinstance(t, T.Opaque):
                self.error("E015", f"`{name}` must be an `extern type`", self.type_spans[name])
            elif kind != "extern type":
                info = self.vocab.records.get(name)
                if info is None:
                    self.error("E015", f"`{name}` must be a{'n' if kind.startswith('e') else ''} {kind}",
                               self.type_spans[name])
                elif info.extern != (kind == "extern record"):
                    want = "an `extern record` (the engine builds it)" if kind == "extern record" \
                        else "a plain `record` (the rules build it)"
                    self.error("E015", f"`{name}` must be {want}", info.decl.name.span)
        for rec, fields in REQUIRED_FIELDS.items():
            info = self.vocab.records.get(rec)
            if info is None:
                continue
            for fname, spelling in fields.items():
                have = info.fields.get(fname)
                if have is None:
                    self.error("E015", f"record `{rec}` needs a field `{fname}: {spelling}` (the engine reads it)",
                               info.decl.name.span)
                elif have not in (T.PRIMITIVES[spelling], T.ERROR):
                    self.error("E015", f"field `{rec}.{fname}` must have type `{spelling}` (the engine reads it)",
                               info.decl.name.span)
        if missing:
            self.error("E015", "the prelude does not declare " + ", ".join(missing)
                       + "; the section kinds need them", anchor)


def build_vocabulary(files: list[A.SourceFile], diags: list[Diagnostic], anchor: A.Span) -> Vocabulary:
    """Collect and resolve every declaration of ``files`` (reporting problems
    into ``diags``); ``anchor`` locates a report about missing declarations."""
    builder = _Builder(diags)
    vocab = builder.build(files)
    builder.requirements(anchor)
    return vocab


def _where(span: A.Span) -> str:
    return f"{span.file}:{span.line}:{span.col}"


def _suggest(name: str, candidates) -> list[str]:
    import difflib

    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.7)
    return [f"help: did you mean `{close[0]}`?"] if close else []
