"""``CountedLoopSchedulerNode`` and ``build_loop_scheduler_nodes``.

Why a ``FusedSchedulerNode`` subclass (docs/layout_model.md §5.4):
``Scheduler._codegen`` dispatches only ``SchedulerNode | FusedSchedulerNode`` to
``codegen_node``, and a GroupedSchedulerNode would be unpacked before codegen.
The wrapper never unpacks (``unpack() -> [self]``) and never fuses
(``can_fuse`` False), so one ``codegen_node`` call sees the whole loop tree and
emits it as one kernel (the bundle boundary constraint).

Inductor's bookkeeping (reads/writes, outputs, ``name_to_fused_node``) sees the
*flattened* SchedulerNodes (``get_nodes()``); the loop tree itself lives in
``body`` (``SchedulerNode | CountedLoopSchedulerNode``, in order).

Grouping (``build_loop_scheduler_nodes``): maximal contiguous runs of nodes whose
``LoopStamp.group_id[depth]`` agree are wrapped, recursively one depth deeper.  The
pre-scheduling pass lays groups out as contiguous op runs and the topological
order keeps them so; a group id reappearing after a gap, or members that
disagree on the loop count, is a tiling bug -- ``LoopGroupError`` names the nodes.
"""

from __future__ import annotations

from typing import Any

from torch._inductor.scheduler import BaseSchedulerNode, FusedSchedulerNode

from spyre_rules.errors import SpyreRulesError
from spyre_rules.ir.loop_stamp import loop_group_id, loop_stamp

__all__ = ["CountedLoopSchedulerNode", "LoopGroupError", "build_loop_scheduler_nodes"]


class LoopGroupError(SpyreRulesError, RuntimeError):
    """Loop-group members are not contiguous or disagree on their loop counts."""


class CountedLoopSchedulerNode(FusedSchedulerNode):
    """``body`` executed ``loop_count`` times (one counted loop level)."""

    def __init__(self, scheduler: Any, body: list[BaseSchedulerNode], loop_count: Any) -> None:
        flat: list[BaseSchedulerNode] = []
        for node in body:
            flat.extend(node.get_nodes())
        super().__init__(scheduler, flat)
        self.body = list(body)
        self.loop_count = loop_count

    @classmethod
    def create(cls, body: list[BaseSchedulerNode], loop_count: Any) -> CountedLoopSchedulerNode:
        scheduler = body[0].scheduler
        node = cls(scheduler, body, loop_count)
        for sn in node.get_nodes():
            scheduler.name_to_fused_node[sn.get_name()] = node
        return node

    def unpack(self) -> list[BaseSchedulerNode]:
        return [self]

    @classmethod
    def can_fuse(cls, producer: BaseSchedulerNode, consumer: BaseSchedulerNode) -> bool:
        return False


def _ir(node: Any) -> Any:
    nodes = node.get_nodes()
    return nodes[0].node if nodes else None


def _gid(node: Any) -> tuple[int, ...] | None:
    return loop_group_id(_ir(node))


def _names(nodes: list[Any]) -> list[str]:
    return [n.get_name() for n in nodes]


def _count(run: list[Any], depth: int) -> Any:
    counts = {}
    for node in run:
        # LoopStamp holds one count per level (checked when it is made).
        counts.setdefault(loop_stamp(_ir(node)).counts[depth], []).append(node.get_name())
    if len(counts) != 1:
        detail = "; ".join(f"{names} count {c}" for c, names in counts.items())
        raise LoopGroupError(
            f"build_loop_scheduler_nodes: loop group {_gid(run[0])[:depth + 1]} members "
            f"disagree on the loop count at depth {depth}: {detail}"
        )
    return next(iter(counts))


def _runs(nodes: list[Any], depth: int) -> list[tuple[Any, list[Any]]]:
    """Maximal runs ``(key, nodes)``; key None = a node outside any loop at this depth."""
    runs: list[tuple[Any, list[Any]]] = []
    for node in nodes:
        gid = _gid(node)
        key = None if gid is None or len(gid) <= depth else gid[depth]
        if key is not None and runs and runs[-1][0] == key:
            runs[-1][1].append(node)
        else:
            runs.append((key, [node]))
    return runs


def _group(nodes: list[Any], depth: int) -> list[Any]:
    runs = _runs(nodes, depth)
    seen: dict[Any, int] = {}
    for r, (key, run) in enumerate(runs):
        if key is None:
            continue
        if key in seen:
            between = [n for _, other in runs[seen[key] + 1:r] for n in _names(other)]
            raise LoopGroupError(
                f"build_loop_scheduler_nodes: loop group {_gid(run[0])[:depth + 1]} is not "
                f"contiguous: {_names(runs[seen[key]][1])} and {_names(run)} are separated "
                f"by {between}"
            )
        seen[key] = r
        _count(run, depth)
    result: list[Any] = []
    for key, run in runs:
        if key is None:
            result.extend(run)
        else:
            result.append(CountedLoopSchedulerNode.create(_group(run, depth + 1), _count(run, depth)))
    return result


def build_loop_scheduler_nodes(nodes: list[Any]) -> list[Any]:
    """Wrap every loop group (nested by ``LoopStamp.group_id`` path) in counted-loop nodes."""
    if not any(_gid(n) is not None for n in nodes):
        return nodes
    return _group(list(nodes), 0)
