"""Remembered results of ``spyre-rules check``: the same inputs to the same
checker print the same report, so it is printed from the cache.

Parsing and type-checking the bundled policy is most of the command's time
(about 30 ms of its 45 over ``python -c pass``, imports a quarter); an editor
or a pre-commit hook checking unchanged files repeats exactly that work.  A
result is stored under a SHA-256 of everything the report depends on:

* every checked file's display name (relative to the working directory, as
  the report shows it) and bytes, in order, and whether the policy must be
  complete;
* the output format and ``--strict``;
* the checker itself: the bytes of every module of ``spyre_rules/lang``, the
  grammar, and the modules that render the report (this one and
  ``commands/check.py``), and the Python version.

So any edit of a policy file or of the checker is a new key: a stored report
is never stale, only unused.  Entries live beside the parser tables
(``$SPYRE_RULES_CACHE_DIR``, else ``~/.cache/spyre-rules``) in
``check-results/``, at most ``MAX_ENTRIES`` of them (the oldest go first); an
unwritable directory only means checking every time.
``SPYRE_RULES_CHECK_CACHE=0`` turns the cache off (the checker runs and
nothing is stored).  No torch and no language module is imported here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CACHE_FORMAT = 1
MAX_ENTRIES = 64
ENV_SWITCH = "SPYRE_RULES_CHECK_CACHE"

_PACKAGE = Path(__file__).resolve().parent.parent
# What produces a report besides its inputs: the language package, and the command rendering it.
_CHECKER_DIRS = (_PACKAGE / "lang", _PACKAGE / "lang" / "sections")
_CHECKER_FILES = (_PACKAGE / "commands" / "check.py", Path(__file__).resolve(), _PACKAGE / "errors.py",
                  _PACKAGE / "resources.py")


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "off", "no", "false")


def _sha256():
    try:  # the builtin module: hashlib would load OpenSSL (several ms of start-up)
        from _sha256 import sha256  # Python <= 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # Python >= 3.12
        except ImportError:  # pragma: no cover
            from hashlib import sha256
    return sha256()


def _checker_files() -> list[Path]:
    from spyre_rules.resources import grammar_file

    files = [grammar_file(), *_CHECKER_FILES]
    for folder in _CHECKER_DIRS:
        files += sorted(folder / name for name in os.listdir(folder) if name.endswith(".py"))
    return files


def result_key(sources: list[tuple[str, bytes]], complete: bool, fmt: str, strict: bool) -> str:
    """The hex digest naming the report of these inputs (see the module doc)."""
    digest = _sha256()

    def add(data: bytes) -> None:  # length-prefixed: no two sequences of parts hash alike
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)

    add(f"{CACHE_FORMAT}\0{sys.version}\0{fmt}\0{int(strict)}\0{int(complete)}".encode())
    for path in _checker_files():
        add(str(path.relative_to(_PACKAGE.parent) if path.is_relative_to(_PACKAGE.parent) else path).encode())
        add(path.read_bytes())
    add(str(len(sources)).encode())
    for name, data in sources:
        add(name.encode("utf-8", "surrogateescape"))
        add(data)
    return digest.hexdigest()


def _folder() -> Path:
    from spyre_rules.lang.lark_support import cache_dir

    return cache_dir() / "check-results"


def load(key: str) -> tuple[int, str] | None:
    """``(exit code, report)`` stored under ``key``, or None."""
    try:
        data = (_folder() / f"{key}.txt").read_bytes()
        head, _, text = data.partition(b"\n")
        return int(head), text.decode("utf-8")
    except (OSError, ValueError, UnicodeDecodeError):
        return None  # missing, unreadable or corrupt: check again


def store(key: str, code: int, text: str) -> None:
    folder = _folder()
    path = folder / f"{key}.txt"
    tmp = folder / f"{key}.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(f"{code}\n".encode() + text.encode("utf-8"))
        os.replace(tmp, path)  # atomic: a concurrent reader sees no entry or the whole entry
        _prune(folder)
    except OSError:  # not writable: nothing is remembered
        try:
            tmp.unlink()
        except OSError:
            pass


def _prune(folder: Path) -> None:
    """Keep the ``MAX_ENTRIES`` newest entries."""
    entries = []
    for entry in os.scandir(folder):
        if entry.name.endswith(".txt"):
            try:
                entries.append((entry.stat().st_mtime_ns, entry.path))
            except OSError:
                pass
    entries.sort(reverse=True)
    for _, path in entries[MAX_ENTRIES:]:
        try:
            os.unlink(path)
        except OSError:
            pass
