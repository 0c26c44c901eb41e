"""The parser tables of the ``.rules`` grammar, built by lark and cached.

``spyre-rules check`` must start fast, and importing lark and analysing the
grammar cost more than the whole check.  So lark runs only when the tables for
the current grammar text are not cached yet: :func:`load_tables` builds the
LALR tables with lark, reduces them to plain data (ints, strings, tuples,
dicts) and stores them with :mod:`marshal` in the user cache directory, under
a name holding a hash of the grammar text, the lark version, this module's
table format and the Python version.  Editing ``grammar/spyre_rules.lark``
changes the name, so a cached table is never stale; a missing, unreadable or
corrupt cache file is rebuilt; an unwritable cache directory only means
building in memory each time.

The cached data is exactly what lark's LALR parser and tree builder use:

* ``states``: state -> {terminal or rule name: (SHIFT, state) | (REDUCE, rule index)};
* ``rules``: per rule, (size, origin name, callback name, child filter,
  Nones to append, expand-single-child) -- lark's ``ChildFilterLALR`` and
  ``ExpandSingleChild`` wrappers, read from its ``ParseTreeBuilder``;
* ``terminals``: (name, pattern kind, pattern value, regexp), and the ignored ones.

``Token`` is lark's token shape (a ``str`` with a type and positions) without lark.
"""

from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path

# Bump when the layout of the cached data changes.
TABLE_FORMAT = 1
LARK_VERSION = "1.3.1"
SHIFT, REDUCE = 0, 1
ERROR_TOKENS = ("BAD_STRING", "BAD_CHAR")
LARK_OPTIONS = dict(parser="lalr", lexer="basic", keep_all_tokens=True, maybe_placeholders=True)


class Token(str):
    """A lexed token: its text, terminal ``type`` and position (as lark's Token)."""

    __slots__ = ("type", "start_pos", "line", "column", "end_line", "end_column", "end_pos")

    def __new__(cls, type_, value, start_pos=None, line=None, column=None, end_line=None,
                end_column=None, end_pos=None):
        self = str.__new__(cls, value)
        self.type = type_
        self.start_pos = start_pos
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column
        self.end_pos = end_pos
        return self

    @property
    def value(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {str.__repr__(self)})"

    def __reduce__(self):
        return (Token, (self.type, str.__str__(self), self.start_pos, self.line, self.column,
                        self.end_line, self.end_column, self.end_pos))


class Tree:
    """What lark's tree builder makes for a rule without a transformer method
    (``Transformer.__default__``): only ``_inlined`` rules, whose children are
    spliced into their parent."""

    __slots__ = ("data", "children")

    def __init__(self, data: str, children: list) -> None:
        self.data = data
        self.children = children


def import_lark():
    """lark itself (only to build the tables, and in tests comparing lexers)."""
    # lark only uses the third-party `regex` module when asked to (regex=True);
    # skip its speculative import.
    if "lark" in sys.modules:
        return sys.modules["lark"]
    blocked = "regex" not in sys.modules
    if blocked:
        sys.modules["regex"] = None  # type: ignore[assignment]
    try:
        import lark
    finally:
        if blocked:
            del sys.modules["regex"]
    return lark


def __getattr__(name: str):
    if name == "lark":  # `from spyre_rules.lang.lark_support import lark` (tests, fuzzers)
        return import_lark()
    raise AttributeError(name)


class _KeepErrorTokens:
    """A lark postlexer keeping the error terminals (unused by any rule) in the lexer."""

    always_accept = ERROR_TOKENS

    def process(self, stream):
        return stream


def build_lark(grammar: str):
    """lark's LALR parser for ``grammar`` (no transformer: trees of lark Trees)."""
    lark = import_lark()
    return lark.Lark(grammar, postlex=_KeepErrorTokens(), **LARK_OPTIONS)


def build_tables(grammar: str) -> dict:
    """The plain-data parser tables of ``grammar`` (see the module doc), built with lark."""
    lark = import_lark()
    from lark.parsers.lalr_analysis import Shift
    from lark.parse_tree_builder import ChildFilterLALR, ChildFilterLALR_NoPlaceholders, ExpandSingleChild

    parser = build_lark(grammar)
    if lark.__version__ != LARK_VERSION:  # the wrappers read below are lark 1.3.1's
        raise RuntimeError(f"lark {LARK_VERSION} is required, found {lark.__version__}")
    rule_index: dict = {}
    rules = []
    for rule, chain in parser._parse_tree_builder.rule_builders:
        name = rule.alias or rule.options.template_source or rule.origin.name
        expand1 = False
        to_include = None
        append_none = 0
        for wrapper in chain:
            if wrapper is ExpandSingleChild:
                expand1 = True
            elif getattr(wrapper, "func", None) is ChildFilterLALR:
                to_include = tuple((int(i), bool(expand), int(add)) for i, expand, add in wrapper.args[0])
                append_none = int(wrapper.args[1])
            elif getattr(wrapper, "func", None) is ChildFilterLALR_NoPlaceholders:
                to_include = tuple((int(i), bool(expand), 0) for i, expand in wrapper.args[0])
            else:
                raise RuntimeError(f"unexpected lark tree-builder wrapper {wrapper!r} for {rule}")
        rule_index[rule] = len(rules)
        rules.append((len(rule.expansion), str(rule.origin.name), str(name), to_include, append_none, expand1,
                      bool(rule.options.expand1 and not rule.alias and len(rule.expansion) == 1)))
    table = parser.parser.parser.parser.parse_table
    states = {}
    for state, acts in table.states.items():
        states[int(state)] = {str(sym): (SHIFT, int(arg)) if action is Shift else (REDUCE, rule_index[arg])
                         for sym, (action, arg) in acts.items()}
    terminals = tuple((str(t.name), str(t.pattern.type), str(t.pattern.value), str(t.pattern.to_regexp()))
                      for t in parser.terminals)
    return {
        "format": TABLE_FORMAT,
        "states": states,
        "start": int(table.start_states["start"]),
        "end": int(table.end_states["start"]),
        "rules": tuple(rules),
        "terminals": terminals,
        "ignore": tuple(str(name) for name in parser.lexer_conf.ignore),
    }


def _digest(data: bytes) -> str:
    try:  # the builtin module: hashlib would load OpenSSL (several ms of start-up)
        from _sha256 import sha256  # Python <= 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # Python >= 3.12
        except ImportError:  # pragma: no cover
            from hashlib import sha256
    return sha256(data).hexdigest()


def cache_dir() -> Path:
    """Where cached tables live: ``$SPYRE_RULES_CACHE_DIR``, else the user cache
    directory (``$XDG_CACHE_HOME`` or ``~/.cache``) ``/spyre-rules``."""
    explicit = os.environ.get("SPYRE_RULES_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "spyre-rules"


def cache_file(grammar: str) -> Path:
    key = f"{TABLE_FORMAT}\0{LARK_VERSION}\0{marshal.version}\0{sys.version_info[:2]}\0{grammar}"
    return cache_dir() / f"parser-tables-{_digest(key.encode('utf-8'))[:32]}.marshal"


def _valid(tables) -> bool:
    return (isinstance(tables, dict) and tables.get("format") == TABLE_FORMAT
            and {"states", "start", "end", "rules", "terminals", "ignore"} <= tables.keys())


def load_tables(grammar: str) -> dict:
    """The parser tables of ``grammar``: from the cache, else built and cached."""
    path = cache_file(grammar)
    try:
        tables = marshal.loads(path.read_bytes())
        if _valid(tables):
            return tables
    except (OSError, ValueError, EOFError, TypeError):
        pass  # missing or corrupt: rebuild
    tables = build_tables(grammar)
    data = marshal.dumps(tables)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)  # atomic: a concurrent reader sees no file or the whole file
    except OSError:  # cache not writable: the tables were built in memory
        try:
            tmp.unlink()
        except OSError:
            pass
    return tables
