"""Mutations of bench/fuzz_rules.py: one function per input class.

``make_input(seeds, seed, index)`` is input ``index`` of ``seed`` (always the
same): the bundled policy with one or a few mutations of one class applied.
"""

from __future__ import annotations

import random
import re

CLASSES = ("token", "structure", "cross-file", "numeric", "template", "deep", "long", "special")
TOKEN = re.compile(rb'#[^\n]*|"(?:[^"\\\n]|\\[^\n])*"|[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9_]*|//|==|!=|<=|>=|->|\S')
ITEM_START = re.compile(rb"^\s*(const|extern|record|fact|config|let|skip|reject|pass|join|conform|start|single|"
                        rb"require|otherwise|splits|bound|order|required|cost|exhausted|[a-z_]+\s*:)", re.M)
WORDS = [b"const", b"let", b"skip", b"reject", b"when", b"because", b"and", b"or", b"not", b"in", b"is",
         b"known", b"unknown", b"emit", b"for", b"if", b"otherwise", b"splits", b"bound", b"order", b"by", b"cost",
         b"required", b"exhausted", b"config", b"record", b"fact", b"extern", b"type", b"true", b"false",
         b"op", b"x", b"c", b"tile", b"c.span_bytes", b"config.max_span_bytes", b"config.dump_dir",
         b"AUTO_SPLIT_CAP", b"len", b"min", b"max", b"sum", b"sorted", b"ceil_div", b"legal_splits",
         b"conforms", b"{}", b"[]", b"()", b"(", b")", b"[", b"]", b"{", b"}", b";", b",", b":", b".",
         b"?", b"->", b"==", b"+", b"-", b"*", b"//", b"%", b"|", b"&", b"subset", b"is known"]
NUMBERS = [b"0", b"1", b"-1", b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808",
           b"18446744073709551616", b"4294967296 * 4294967296", b"8 TiB * 1048576", b"1_000_000",
           b"1 XiB", b"0 // 0", b"5 % 0", b"ceil_div(1, 0)", b"9" * 4000, b"9" * 4400 + b" * 2",
           b"(" + b"9" * 4000 + b" * " + b"9" * 4000 + b")", b"1__", b"0x10", b"00012", b"1e9"]
TEMPLATES = [rb'"cls=\{op.__class__.__mro__\}"', rb'"\{op.__class__.__init__.__globals__\}"',
             rb'"{op.__class__}"', rb'"{op.__dict__}"', rb'"{c.__class__}"', rb'"{c.span_bytes.__class__}"',
             rb'"x \{ y"', rb'"\{__ctx__\}"', rb'"{__ctx__}"', rb'"{{x}}"', rb'"{x"', rb'"x}"', rb'"{}"',
             rb'"{a.b.c}"', rb'"{config.max_span_bytes}"', rb'"{config.dump_dir}"', rb'"{config}"',
             rb'"{op}{op}{op"', rb'"\\{op}"', rb'"{ op }"', rb'"{1}"', rb'"{op.x.y.z}"', rb'"\{{op}\}"']
SPECIAL = [b"\x00", b"\xef\xbb\xbf", b"\r", b"\r\n", b"\t", b"\x0b", b"\x0c", b"\\\n", b"\"\\\n\"",
           "\u2028".encode(), "\u2029".encode(), "\x85".encode(), "é".encode(), "\U0001f600".encode(),
           b"\xff", b"\xc3", b"\xe2\x82", b"\x80", b"\"", b"\"abc", b"\\", b"#", b"$", b"@", b"`", b"\x1b[0m"]
PRELUDE = "prelude.rules"


# ------------------------------------------------------------------- mutations

def _tokens(data: bytes) -> list[tuple[int, int]]:
    return [m.span() for m in TOKEN.finditer(data) if not m.group().startswith(b"#")]


def _pos(rng: random.Random, data: bytes, spans) -> int:
    return rng.choice(rng.choice(spans)) if spans else rng.randrange(len(data) + 1)


def _insert(rng: random.Random, data: bytes, piece: bytes) -> bytes:
    pos = _pos(rng, data, _tokens(data))
    return data[:pos] + piece + data[pos:]


def _token(rng, data):
    spans = _tokens(data)
    if not spans:
        return data + rng.choice(WORDS)
    a, b = rng.choice(spans)
    kind = rng.randrange(5)
    if kind == 0:
        return data[:a] + data[b:]
    if kind == 1:
        return data[:b] + b" " + data[a:b] + data[b:]
    if kind == 2 and len(spans) > 1:
        i = rng.randrange(len(spans) - 1)
        (a, b), (c, d) = spans[i], spans[i + 1]
        return data[:a] + data[c:d] + data[b:c] + data[a:b] + data[d:]
    if kind == 3:
        return data[:a] + rng.choice(WORDS) + data[b:]
    return data[:a] + rng.choice(WORDS) + b" " + data[a:]


def _items(data: bytes) -> list[tuple[int, int]]:
    """Rough item spans: from an item keyword at a line start to the next `;`."""
    out = []
    for m in ITEM_START.finditer(data):
        end = data.find(b";", m.start())
        if end > 0:
            out.append((m.start(), end + 1))
    return out


def _structure(rng, data):
    lines = data.split(b"\n")
    kind = rng.randrange(6)
    if kind == 0 and len(lines) > 1:
        del lines[rng.randrange(len(lines))]
        return b"\n".join(lines)
    if kind == 1:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(lines))
        return b"\n".join(lines)
    if kind == 2:
        return data[:rng.randrange(len(data) + 1)]
    items = _items(data)
    if kind == 3 and items:  # move an item
        a, b = rng.choice(items)
        rest = data[:a] + data[b:]
        pos = rng.randrange(len(rest) + 1)
        return rest[:pos] + data[a:b] + rest[pos:]
    if kind == 4 and items:  # duplicate an item in place
        a, b = rng.choice(items)
        return data[:b] + b"\n" + data[a:b] + data[b:]
    # duplicate a whole section (or the file)
    m = re.search(rb"\n([a-z]+) \{", data)
    if m:
        end = data.find(b"\n}", m.start())
        if end > 0:
            return data + data[m.start():end + 2]
    return data + data


def _cross_file(rng, files):
    files = list(files)
    i = rng.randrange(len(files))
    name, data = files[i]
    kind = rng.randrange(5)
    if kind == 0 and len(files) > 1:  # move an item to another file
        items = _items(data)
        j = rng.choice([k for k in range(len(files)) if k != i])
        if items:
            a, b = rng.choice(items)
            files[i] = (name, data[:a] + data[b:])
            files[j] = (files[j][0], files[j][1] + b"\n" + data[a:b] + b"\n")
        return files
    if kind == 1 and len(files) > 1:  # drop a file
        del files[i]
        return files
    names = {n for n, _ in files}
    if kind == 2:  # a second copy under another name
        files.append((_unused(f"copy_{i}.rules", names), data))
        return files
    if kind == 3:  # rename: the prelude under another name, or another file as a prelude in another folder
        new = "elsewhere/" + PRELUDE if not name.endswith(PRELUDE) else "rules/not_prelude.rules"
        files[i] = (_unused(new, names), data)
        return files
    j = rng.randrange(len(files))  # copy an item to another file
    items = _items(data)
    if items:
        a, b = rng.choice(items)
        files[j] = (files[j][0], files[j][1] + b"\n" + data[a:b] + b"\n")
    return files


def _unused(name: str, names: set[str]) -> str:
    """``name``, or a variant of it no other file has (display names are unique:
    the checker's paths are distinct files)."""
    n = 2
    stem = name
    while name in names:
        name = f"{stem[:-6]}_{n}.rules"
        n += 1
    return name


def _numeric(rng, data):
    ints = [m.span() for m in re.finditer(rb"(?<![A-Za-z_0-9])[0-9][0-9_]*", data)]
    piece = rng.choice(NUMBERS)
    if ints and rng.random() < 0.8:
        a, b = rng.choice(ints)
        return data[:a] + piece + data[b:]
    return data + b"\nconst FUZZ_N = " + piece + b";\nconst FUZZ_M = FUZZ_N * FUZZ_N;\n"


def _template(rng, data):
    strings = [m.span() for m in re.finditer(rb'"(?:[^"\\\n]|\\[^\n])*"', data)]
    piece = rng.choice(TEMPLATES)
    if strings and rng.random() < 0.7:
        a, b = rng.choice(strings)
        if rng.random() < 0.5:
            return data[:a] + piece + data[b:]
        inner = piece[1:-1]
        pos = rng.randrange(a + 1, b)
        return data[:pos] + inner + data[pos:]
    return data + b"\neligibility {\n  reject fuzz when is_computed_buffer(op) because " + piece + b";\n}\n"


def _deep(rng, data):
    n = rng.choice([50, 101, 500, 1001, 4000, 20000])
    opener, closer = rng.choice([(b"(", b")"), (b"[", b"]"), (b"{", b"}"), (b"not ", b""), (b"- ", b""),
                                 (b"((((1,", b""), (b"f(", b")"), (b"x.", b""), (b"[1 for a in ", b"]")])
    body = opener * n + b"1" + (closer * n if rng.random() < 0.5 else b"")
    if rng.random() < 0.5:
        return data + b"\nconst FUZZ_DEEP = " + body + b";\n"
    return _insert(rng, data, body)


def _long(rng, data):
    n = rng.choice([1000, 5000, 20000, 120000])
    kind = rng.randrange(6)
    if kind == 0:
        piece = b"n" * n
    elif kind == 1:
        piece = b'"' + b"s{op}" * (n // 5) + b'"'
    elif kind == 2:
        piece = b"7" * n
    elif kind == 3:
        piece = b"# " + b"c" * n + b"\n"
    elif kind == 4:
        piece = b"1" + b" + 1" * (n // 2)
    else:
        piece = b"".join(b"const L%d = %d;\n" % (k, k) for k in range(n // 10))
    return _insert(rng, data, piece)


def _special(rng, data):
    kind = rng.randrange(4)
    if kind == 0:
        return _insert(rng, data, rng.choice(SPECIAL))
    if kind == 1:
        pos = rng.randrange(len(data) + 1)
        return data[:pos] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8))) + data[pos:]
    if kind == 2:  # every newline of the file turned into another line ending
        return data.replace(b"\n", rng.choice([b"\r\n", b"\r", "\u2028".encode(), b"\\\n"]))
    return rng.choice(SPECIAL) + data


_SINGLE = {"token": _token, "structure": _structure, "numeric": _numeric, "template": _template,
           "deep": _deep, "long": _long, "special": _special}


def make_input(seeds: list[tuple[str, bytes]], seed: int, index: int) -> tuple[str, list[tuple[str, bytes]]]:
    """Input ``index`` of ``seed``: (mutation class, files)."""
    rng = random.Random(f"{seed}:{index}")
    cls = CLASSES[index % len(CLASSES)]
    files = list(seeds)
    for _ in range(1 if rng.random() < 0.8 else rng.randrange(2, 4)):
        if cls == "cross-file":
            files = _cross_file(rng, files)
        else:
            i = rng.randrange(len(files))
            files[i] = (files[i][0], _SINGLE[cls](rng, files[i][1]))
    return cls, files
