"""The loop indices of an open run: which split dims of its members one index walks.

A run is one loop; at each level every tiled member tiles its own split dim.
Which dims those are is fixed when a member joins, but a later member may need a
finer split than the op that opened the run (the scores of an attention need more
query blocks than the restickified query before them), or a split along an index
the run does not tile yet.  To carry that op's plan back onto every member, the
grouping keeps, for the open run, the sets of (member, split dim) pairs that one
loop index walks:

* the dims a member tiles at the same level are one index (the loop's);
* a consumer's split dim ``d`` and a member's host dim ``h`` are one index when
  ``read_tile_dim(consumer, member, h) == d``: the consumer's loop symbol of ``d``
  alone addresses ``h`` of every read, over the whole extent, so tile ``t`` of a
  split of ``d`` reads tile ``t`` of a split of ``h`` -- tiled or not yet.

A union-find over those pairs.  :func:`refine` measures the refined loop for an
op's plan; whether to take it (every member conforms) is the rules' decision.
"""

from __future__ import annotations

from typing import Any, Callable

from spyre_rules.engine.values import Level, Refine, RunMember, Tiling
from spyre_rules.facts import op_facts as facts

__all__ = ["RunAxes", "refine", "split_dim_count"]

Node = tuple[str, int]  # (op name, split dim)


class RunAxes:
    """Union-find over (op name, split dim) for one open run."""

    def __init__(self, parent: dict[Node, Node] | None = None) -> None:
        self.parent: dict[Node, Node] = {} if parent is None else dict(parent)

    def copy(self) -> "RunAxes":
        return RunAxes(self.parent)

    def find(self, node: Node) -> Node:
        parent = self.parent.setdefault(node, node)
        if parent == node:
            return node
        root = self.find(parent)
        self.parent[node] = root
        return root

    def union(self, a: Node, b: Node) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra

    def link(self, op: Any, levels: list[Level] | None, loop: list[Level], first: str | None,
             tiled: dict[str, Any]) -> None:
        """Record the indices ``op`` (joining with ``levels``) shares with the run:
        its level dims with the loop's, its read-linked dims with the members'.
        ``first``: the name of the member whose levels are ``loop``; ``tiled``: the
        run's tiled members (``_Member``) before ``op``, by name."""
        name = op.get_name()
        if levels is not None and first is not None:
            for lv, run_lv in zip(levels, loop):
                self.union((first, run_lv.host_dim), (name, lv.host_dim))
        for d, node in read_links(op, tiled):
            self.union(node, (name, d))


def read_links(op: Any, tiled: dict[str, Any]) -> list[tuple[int, Node]]:
    """``(d, (member, h))`` for every host dim ``h`` of a tiled member ``op`` reads
    that ``op``'s split dim ``d`` walks (``read_tile_dim``).  ``tiled``: the run's
    tiled members by name; looked up by ``op``'s reads, so the cost per op does not
    grow with the run (tests/tiling/test_linear_tiling.py)."""
    links = []
    for member in sorted(facts.read_buffers(op)):
        m = tiled.get(member)
        if m is None:
            continue
        for h in range(len(m.op.get_size())):
            d = facts.read_tile_dim(op, member, h)
            if d is not None:
                links.append((int(d), (member, h)))
    return links


def split_dim_count(op: Any) -> int:
    """Output dims plus reduction dims: the split dims ``op`` has."""
    data = getattr(op, "data", None)
    return len(getattr(data, "ranges", None) or ()) + len(getattr(data, "reduction_ranges", None) or ())


def _levels_on(axes: RunAxes, op: Any, loop: list[tuple[Node, int]]) -> list[Level] | None:
    """``op``'s own split dim on each loop index (None: no dim, or two dims, on one
    index; or an output level inside a reduction level)."""
    name = op.get_name()
    rank = facts.rank(op)
    by_root: dict[Node, list[int]] = {}
    for d in range(split_dim_count(op)):
        if (name, d) in axes.parent:
            by_root.setdefault(axes.find((name, d)), []).append(d)
    levels = []
    for root, split in loop:
        dims = by_root.get(root, [])
        if len(dims) != 1:
            return None
        dim = dims[0]
        if dim < rank and levels and levels[-1].is_reduction:
            return None
        levels.append(Level(dim, split, dim >= rank))
    return levels


def refine(op: Any, plan_levels: list[Level], tiled: dict[str, Any], loop: list[Level],
           axes: RunAxes, legal: Callable[[Any, int], list[int]] | None = None,
           ) -> tuple[Refine, dict[str, list[Level]]] | None:
    """The open run's loop refined to ``op``'s plan: per loop index the larger of the
    run's and the plan's split, the plan's indices the run does not tile appended
    (inside the run's levels), every tiled member on its own dims, ``op`` on its own.
    With ``legal`` (legality's counts of one split dim of an op), each index takes the
    smallest count at least that larger split which ``legal`` admits for ``op``'s and
    every remaining member's dim on it (:func:`_common_count`): 16052 query rows are
    4 exact tiles of 4013 for the scores but cut the sticks of the softmax's row
    statistics, whose loop needs 5 tiles of 3328 -- one count all can run.
    Also each member's levels by name.  A member with no single dim on some index
    cannot take the refined loop: it and the members before it are ``closed`` (they
    keep the run's split in a loop of their own, the rest read their full buffers
    after it).  None when the plan has a reduction level, changes nothing, ``op`` has
    no single dim on some index, or no member is left.
    ``tiled``: the run's tiled members (``_Member``) by name, in run order."""
    if not loop or not tiled or any(lv.is_reduction for lv in plan_levels):
        return None
    name = op.get_name()
    links = read_links(op, tiled)
    if not links:
        return None
    trial = axes.copy()
    for d, node in links:
        trial.union(node, (name, d))
    first = next(iter(tiled))
    run = [(trial.find((first, lv.host_dim)), lv.split) for lv in loop]
    roots = [root for root, _ in run]
    own = {}
    for lv in plan_levels:
        if (name, lv.host_dim) not in trial.parent:
            return None  # a dim of op no member's dim is walked by
        own[trial.find((name, lv.host_dim))] = lv.split
    refined = [(root, max(split, own.get(root, 1))) for root, split in run]
    refined += [(root, split) for root, split in own.items() if root not in roots]
    op_levels = _levels_on(trial, op, refined)
    if op_levels is None:
        return None
    members: dict[str, list[Level]] = {}
    closed: list[str] = []
    for member_name, m in tiled.items():
        levels = _levels_on(trial, m.op, refined)
        if levels is None:
            # It and every member before it keep the run's split in a loop of their own.
            closed += list(members) + [member_name]
            members = {}
        else:
            members[member_name] = levels
    if not members:
        return None
    if legal is not None:
        dims = [(op, op_levels)] + [(tiled[n].op, lv) for n, lv in members.items()]
        refined = [(root, _common_count(split, [(o, lv[i].host_dim) for o, lv in dims], legal))
                   for i, (root, split) in enumerate(refined)]
        op_levels = _resplit(op_levels, refined)
        members = {n: _resplit(lv, refined) for n, lv in members.items()}
    if [split for _, split in refined] == [lv.split for lv in loop]:
        return None
    record = Refine(op_levels, _tiling(op_levels),
                    [RunMember(tiled[n].op, _tiling(lv)) for n, lv in members.items()],
                    frozenset(closed))
    return record, members


def _common_count(split: int, dims: list[tuple[Any, int]],
                  legal: Callable[[Any, int], list[int]]) -> int:
    """The smallest count ``>= split`` legal for every ``(op, split dim)`` of one loop
    index (one loop runs one count on all of them); ``split`` itself when there is
    none (the rules' ``conforms`` then refuses it, naming the requirement)."""
    common: set[int] | None = None
    for o, d in dims:
        counts = {k for k in legal(o, d) if k >= split}
        common = counts if common is None else common & counts
        if not common:
            return split
    return min(common) if common else split


def _resplit(levels: list[Level], loop: list[tuple[Node, int]]) -> list[Level]:
    return [Level(lv.host_dim, split, lv.is_reduction) for lv, (_, split) in zip(levels, loop)]


def _tiling(levels: list[Level]) -> Tiling:
    return Tiling.of((lv.host_dim, lv.split) for lv in levels)
