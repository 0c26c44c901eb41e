"""Device coordinates of accesses through views and reshapes are exact (or refused).

Random programs (views and reshapes of random shapes, also of permuted and
sliced inputs) are lowered by Inductor; every load and store index of every op
is turned into device coordinates the way codegen does (``access_coordinates``)
and evaluated at every point of the op's iteration space.  Each point's derived
device address must be the address stickify gives the element the index names
(the stride_map identity, independent of the coordinate algorithm), and every
coordinate must lie inside its device dim.  A coordinate that cannot be derived
must raise CoordinateError, never come out wrong.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
import sympy
import torch
from torch._inductor import ir
from torch._inductor.decomposition import select_decomp_table
from torch._inductor.graph import GraphLowering
from torch._inductor.sizevars import SimplifyIndexing
from torch._inductor.utils import sympy_index_symbol
from torch._inductor.virtualized import V
from torch.fx.experimental.proxy_tensor import make_fx

from spyre_rules.codegen.recorder import ProgramRecorder
from spyre_rules.errors import CoordinateError
from spyre_rules.executor.stickify import _positions
from spyre_rules.program.index_eval import evaluate
from spyre_rules.facts.coordinates import access_coordinates
from spyre_rules.facts.stick_layout import generic_stick_layout

SEEDS = range(60)


def _shape(rng: random.Random, numel: int, rank: int) -> tuple[int, ...]:
    """A random shape of ``numel`` elements with at most ``rank`` dims."""
    factors = []
    rest = numel
    p = 2
    while rest > 1:
        while rest % p == 0:
            factors.append(p)
            rest //= p
        p += 1
    dims = [1] * rank
    for f in factors:
        dims[rng.randrange(rank)] *= f
    return tuple(dims)


def _program(seed: int):
    rng = random.Random(seed)
    dtype = rng.choice([torch.float16, torch.float32])
    rank = rng.randint(1, 4)
    src = tuple(rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 12, 33, 64, 70]) for _ in range(rank))
    while math.prod(src) > 3000:
        src = src[1:]
    kind = rng.choice(["view", "permute", "slice", "contiguous_t"])
    if kind == "slice" and src[-1] < 2:
        kind = "view"
    x = torch.randn(*src, dtype=torch.float32).to(dtype)

    if kind == "view":
        tgt = _shape(rng, math.prod(src), rng.randint(1, 4))
        fn = lambda t: t.view(tgt) + 1.0  # noqa: E731
    elif kind == "permute":
        perm = list(range(len(src)))
        rng.shuffle(perm)
        tgt = _shape(rng, math.prod(src), rng.randint(1, 4))
        fn = lambda t: t.permute(perm).reshape(tgt) * 2.0  # noqa: E731
    elif kind == "slice":
        stop = rng.randint(1, src[-1] - 1)
        numel = math.prod(src[:-1]) * stop
        tgt = _shape(rng, numel, rng.randint(1, 4))
        fn = lambda t: t[..., :stop].reshape(tgt) + 1.0  # noqa: E731
    else:
        tgt = _shape(rng, math.prod(src), rng.randint(1, 4))
        fn = lambda t: t.transpose(0, -1).contiguous().view(tgt) + 1.0  # noqa: E731
    return f"seed {seed}: {kind} {src} -> {tgt} {dtype}", fn, x


def _accesses(fn, x):
    """``(layout, index, ranges)`` of every load and store, as codegen traces them."""
    gm = make_fx(fn, decomposition_table=select_decomp_table())(x)
    graph = GraphLowering(gm)
    out = []
    with V.set_graph_handler(graph):
        graph.run(x)
        for op in graph.operations:
            if not isinstance(op, ir.ComputedBuffer):
                continue
            (sizes, rsizes), body, _ = op.get_default_sizes_body()
            syms = [sympy_index_symbol(f"c{i}") for i in range(len(sizes) + len(rsizes))]
            ranges = dict(zip(syms, [*sizes, *rsizes]))
            rec = ProgramRecorder(op.get_name())
            with V.set_ops_handler(SimplifyIndexing(rec, ranges)):
                body(syms[: len(sizes)], syms[len(sizes):])
            for acc in rec.accesses:
                buf = graph.graph_inputs.get(acc.buffer) or graph.get_buffer(acc.buffer)
                out.append((acc.buffer, buf.get_layout(), acc.index, ranges))
    return out


def _check_access(name, layout, index, ranges, what):
    size = [int(s) for s in layout.size]
    stride = [int(s) for s in layout.stride]
    offset = int(layout.offset)
    dl = generic_stick_layout(size, stride, layout.dtype)
    coords = access_coordinates(dl, size, stride, offset, index, ranges)

    syms = list(ranges)
    grids = torch.meshgrid(*(torch.arange(int(ranges[s])) for s in syms), indexing="ij") if syms else []
    env = {s.name: g.reshape(-1) for s, g in zip(syms, grids)}
    npoints = math.prod(int(r) for r in ranges.values())

    def values(expr):
        v = evaluate(expr, env)
        return torch.as_tensor(v, dtype=torch.int64).expand(npoints) if npoints else torch.as_tensor(v)

    host = values(index) - offset
    address = torch.zeros(npoints, dtype=torch.int64)
    for d, (c, n) in enumerate(zip(coords, dl.device_size)):
        cv = values(c)
        assert bool(((cv >= 0) & (cv < n)).all()), f"{what}: {name} coordinate {d} = {c} leaves [0, {n})"
        address = address * n + cv
    reference = {}
    for lin, off in _positions(dl, tuple(size), tuple(stride)):
        reference.update(zip(off.tolist(), lin.tolist()))
    expected = torch.tensor([reference[int(h)] for h in host], dtype=torch.int64)
    bad = (address != expected).nonzero()
    assert bad.numel() == 0, (
        f"{what}: {name} index {index} -> {[str(c) for c in coords]} addresses "
        f"{int(address[bad[0]])} instead of {int(expected[bad[0]])}"
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_view_access_coordinates_are_exact(seed):
    what, fn, x = _program(seed)
    for name, layout, index, ranges in _accesses(fn, x):
        try:
            _check_access(name, layout, index, ranges, what)
        except CoordinateError:
            pass  # refused cleanly: allowed, never wrong


@pytest.mark.parametrize("src, tgt", [((2, 3), (3, 2)), ((3, 64), (64, 3)), ((5, 37), (37, 5)),
                                      ((4, 6, 5), (5, 24)), ((3, 70), (10, 21))])
def test_straddling_views_are_derived(src, tgt):
    """Rows of the view straddle source rows: coordinates must carry, not be refused."""
    x = torch.randn(*src, dtype=torch.float16)
    for name, layout, index, ranges in _accesses(lambda t: t.view(tgt) + 1.0, x):
        _check_access(name, layout, index, ranges, f"{src} -> {tgt}")
