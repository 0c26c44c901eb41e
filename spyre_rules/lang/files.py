"""Which files a check reads, and their bytes: the PATH arguments resolved.

Each PATH is a ``.rules`` file or a directory (all of its ``*.rules`` files,
sorted by name, not recursive); no PATH means the bundled ``rules/``
directory.  If none of the files is a prelude (``prelude.rules``), the bundled
prelude is read first.  Problems with the paths themselves (missing,
unreadable, not ``.rules``, an empty directory, not a regular file) raise
:class:`UsageError` (exit 2).

Kept apart from ``driver`` and light on imports on purpose: ``spyre-rules
check`` reads its inputs before it knows whether it has to parse them at all
(a cached result of the same inputs, ``commands/check_cache.py``), and the
syntax tree, diagnostics and checker modules are loaded only when it does.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from spyre_rules.lang.limits import MAX_FILE_BYTES
from spyre_rules.resources import rules_dir

SUFFIX = ".rules"
PRELUDE_NAME = "prelude.rules"


class UsageError(Exception):
    """A path cannot be checked at all (exit code 2)."""


def is_prelude(path: str) -> bool:
    return path.replace("\\", "/").rsplit("/", 1)[-1] == PRELUDE_NAME


def display_path(path: Path) -> str:
    """The path as shown in diagnostics: relative to the working directory when
    it is inside it, else absolute."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return str(path) if rel.startswith("..") else rel


def resolve_paths(paths: list[str] | None) -> list[Path]:
    if not paths:
        paths = [str(rules_dir())]
    out: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.suffix == SUFFIX and q.is_file())
            if not found:
                raise UsageError(f"{raw}: no {SUFFIX} files in this directory")
        elif p.exists():
            if p.suffix != SUFFIX:
                raise UsageError(f"{raw}: not a {SUFFIX} file")
            found = [p]
        else:
            raise UsageError(f"{raw}: no such file or directory")
        for q in found:
            key = q.resolve()
            if key not in seen:
                seen.add(key)
                out.append(q)
    return out


def read_sources(paths: list[Path]) -> list[tuple[str, bytes]]:
    return [(display_path(p), read_regular_file(p)) for p in paths]


def read_regular_file(path: Path) -> bytes:
    """The bytes of a regular file (at most ``MAX_FILE_BYTES + 1`` of them: a
    longer file is reported, not read).  Anything else -- a FIFO, a device such
    as ``/dev/zero``, a socket -- is refused without reading (it could block or
    never end).  The file is opened without blocking and checked on the open
    descriptor, so it cannot be swapped between the check and the read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path}: not a regular file")
        chunks = []
        left = MAX_FILE_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror or err}") from None
    finally:
        os.close(fd)


def policy_sources(paths: list[str] | None, complete: bool | None = None) -> tuple[list[tuple[str, bytes]], bool]:
    """The ``(display name, bytes)`` of every file ``paths`` names, the bundled
    prelude first when none of them is a prelude, and whether the files must
    form a complete policy: a directory is a whole policy, so when a PATH is a
    directory (or no PATH is given) they must (one section of each kind, E018);
    single files are checked as parts of a policy (``complete`` overrides this)."""
    sources = read_sources(resolve_paths(paths))
    if not any(is_prelude(name) for name, _ in sources):
        sources = read_sources([rules_dir() / PRELUDE_NAME]) + sources
    if complete is None:
        complete = not paths or any(Path(p).is_dir() for p in paths)
    return sources, complete
