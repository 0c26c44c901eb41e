"""The ``grouping`` section: ``decide_groups(operations)``, planned ops -> coarse-tile groups.

The section kind's check is its record ``SPEC`` (``lang/sections/grouping.py``:
the actions and bindings below); this module compiles it (:func:`compile_grouping`)
and runs it.  The semantics of the ``grouping`` section (docs/rules_language.md §6.6,
docs/layout_model.md §5.1): ops are visited in graph order with at most one open run
of ops sharing one tile loop; the first rule that fires decides
``pass`` / ``join`` / ``conform`` / ``start`` / ``single`` / ``reject``.  Every
condition and message is in ``rules/grouping.rules``; this module only keeps
the run, computes the bindings rules read (``plan``, ``carried``) and allocates
hint ids.

A run is one loop: its levels' split counts are shared by every member, but
each member tiles its *own* host dims (a matmul reads its restickified weight's
dim 0 through its output dim 1), so the run keeps every member's levels.

Closing a run (or a ``single`` op) makes a :class:`TileGroup` shaped like a
user-hint group, ``([ops], [GroupLevel(hint_id, sympy.Integer(split), False), ...])``,
and decides one :class:`AutoHint` per member and level (the member's loop
variable of its host dim at that level; none for a loop-invariant member).
The engine writes nothing into the IR: the pass that applies the decision
stamps the hints (``spyre_rules.hints.automatic``), so ``coarse_tile``
consumes them exactly like user hints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import sympy

from spyre_rules.errors import Unsupported
from spyre_rules.engine.api import evaluator, graph_scope, _require_graph
from spyre_rules.engine.collector import existing_objects_frozen
from spyre_rules.engine.compile import Lazy
from spyre_rules.engine.joint_plans import JointPlan, check_joint, point_reader
from spyre_rules.engine.planner import Evaluator, plan_record
from spyre_rules.lang.sections.grouping import SPEC
from spyre_rules.engine.program import ItemCompiler, Rule
from spyre_rules.engine.run_axes import RunAxes, refine
from spyre_rules.engine.records import AutoHint, GroupLevel, OpDecision, TileGroup, TraceStep
from spyre_rules.engine.values import Carry, Level, NameLog, NamesSoFar, Run, Tiling
from spyre_rules.facts import memo
from spyre_rules.facts import op_facts as facts

__all__ = ["SPEC", "HINT_ID_BASE", "GroupingOutcome", "compile_grouping", "decide_groups",
           "write_positions"]

#: First synthetic hint id (docs/layout_model.md §5.1: hint ids from 10000): an id
#: convention shared with coarse tiling, kept clear of user hint ids -- not policy.
HINT_ID_BASE = 10000

def compile_grouping(ic: ItemCompiler, sec: Any) -> list[Rule]:
    """First-match rules over ``op`` / ``plan`` / ``carried`` / ``run`` / the producer sets."""
    return ic.first_match(sec)


@dataclasses.dataclass
class GroupingOutcome:
    groups: list[TileGroup]
    actions: dict[str, TraceStep]        # op name -> the grouping rule that decided
    decisions: dict[str, OpDecision]     # op name -> planner decision (ops whose plan was read)
    hints: dict[str, tuple[AutoHint, ...]] = dataclasses.field(default_factory=dict)
    # op name -> its levels in its group (the hints the applying pass stamps)
    hoisted: dict[str, str] = dataclasses.field(default_factory=dict)
    # op name -> the op it runs before (rule `hoist`: the first member of the run it
    # is independent of); the applying pass moves it there in the graph


@dataclasses.dataclass(frozen=True)
class _Member:
    op: Any
    levels: list[Level] | None  # the op's own host dim per loop level, outer to inner;
    rule: str                   # None: loop-invariant (untiled, whole result every iteration)


def _tiled(members: list["_Member"]) -> list["_Member"]:
    return [m for m in members if m.levels is not None]


def _tiling(levels: list[Level]) -> Tiling:
    return Tiling.of((lv.host_dim, lv.split) for lv in levels)


def _splits(levels: list[Level]) -> list[int]:
    """The loop's split counts (whether a level tiles a member's output or
    reduction dim is the member's own)."""
    return [lv.split for lv in levels]


def carry(op: Any, tiled: dict[str, _Member], loop: list[Level]) -> Carry | None:
    """The ``carried`` binding: the loop's split on ``op``'s own output dims.

    For each level, every run member ``op`` reads must have its tiled host dim at
    that level read by one split dim of ``op`` (``read_tile_dim``), the same for
    all of them; the dims must be distinct.  A split dim past ``op``'s output dims
    is a reduction dim: that level is a reduction level of ``op`` (accumulated
    across tiles), and a reduction level must be inside every output level
    (codegen's loop order).  None when ``op`` reads no member or any of that
    fails.  A measurement: which answer to act on is the rules'.
    ``tiled``: the run's tiled members by name (looked up per read, not scanned)."""
    reads = facts.read_buffers(op)
    read = [tiled[name] for name in reads if name in tiled]
    if not read or not loop:
        return None
    rank = facts.rank(op)
    levels = []
    for i, level in enumerate(loop):
        dims = {facts.read_tile_dim(op, m.op.get_name(), m.levels[i].host_dim)  # type: ignore[index]
                for m in read}
        if len(dims) != 1 or None in dims:
            return None
        dim = dims.pop()
        if dim < rank and levels and levels[-1].is_reduction:
            return None  # an output level inside a reduction level
        levels.append(Level(dim, level.split, dim >= rank))
    if len({lv.host_dim for lv in levels}) != len(levels):
        return None
    return Carry(levels, _tiling(levels), frozenset(m.op.get_name() for m in read))


def align(plan_levels: list[Level] | None, loop: list[Level]) -> Carry | None:
    """The ``aligned`` binding: for an op independent of the open run, the run's split
    on the op's own planned dims, level by level (prelude ``aligned``).  None without a
    plan, a run, or one output level per loop level."""
    if not plan_levels or not loop or len(plan_levels) != len(loop) \
            or any(lv.is_reduction for lv in plan_levels):
        return None
    levels = [Level(own.host_dim, run.split, False) for own, run in zip(plan_levels, loop)]
    return Carry(levels, _tiling(levels), frozenset())


class _Grouper:
    """One stream of ops with at most one open run.  The main stream visits every op;
    ops that rules ``hoist`` (independent of its open run) go to its side stream,
    whose groups run before the run's loop.  Both record into one outcome
    (``root``: groups, hints, decisions, closed auto-tiled ops, hint ids)."""

    def __init__(self, ev: Evaluator, hinted: frozenset, written: dict[str, int],
                 root: "_Grouper | None" = None, last_writer: dict[str, str] | None = None) -> None:
        self.ev = ev
        self.hinted = hinted
        self.written = written  # buffer name -> graph position of its last write
        self.last_writer = last_writer or {}  # buffer name -> the op that writes it last
        self.root = self if root is None else root
        self.members: list[_Member] = []
        self.member_names = NameLog()
        self.tiled: dict[str, _Member] = {}  # the run's tiled members by name, in run order
        self.axes = RunAxes()  # the open run's loop indices (engine/run_axes.py)
        self.side: _Grouper | None = None  # the hoisted ops' stream (main stream only)
        if root is None:
            self.auto_tiled = NameLog()
            self.groups: list[TileGroup] = []
            self.hints: dict[str, tuple[AutoHint, ...]] = {}
            self.next_id = HINT_ID_BASE
            self.decisions: dict[str, OpDecision] = {}
            self.hoisted: dict[str, str] = {}  # hoisted op -> the op it runs before
            self.joint: dict[str, JointPlan] = {}  # loop-local product -> its reader
        else:
            self.auto_tiled, self.groups, self.hints = root.auto_tiled, root.groups, root.hints
            self.decisions, self.hoisted = root.decisions, root.hoisted
        # The values rules see, rebuilt only when the run changes; the sets in them are
        # views of append-only logs (NamesSoFar), made in O(1): a frozenset of the
        # run's members / every auto-tiled op, copied per visit, made grouping
        # quadratic in the length of a run / the number of auto-tiled ops.
        self._run: Run | None = None

    @property
    def loop(self) -> list[Level]:
        """The open run's levels as its first tiled member runs them (empty: no run)."""
        first = next(iter(self.tiled.values()), None)
        return [] if first is None else list(first.levels)  # type: ignore[arg-type]

    def run_value(self) -> Run:
        if self._run is None:
            loop = self.loop
            self._run = Run(bool(self.members), self.member_names.so_far(), loop, _tiling(loop))
        return self._run

    def auto_tiled_value(self) -> NamesSoFar:
        return self.auto_tiled.so_far()

    def add(self, op: Any, levels: list[Level] | None, rule: str) -> None:
        self.axes.link(op, levels, self.loop, next(iter(self.tiled), None), self.tiled)
        member = _Member(op, None if levels is None else list(levels), rule)
        self.members.append(member)
        self.member_names.add(op.get_name())
        if levels is not None:
            self.tiled[op.get_name()] = member
        self._run = None

    def split_run(self, closed: frozenset) -> None:
        """Close the members up to the last one in ``closed`` as a loop of their own
        (untiled members among them too); the run goes on with the rest."""
        if not closed:
            return
        cut = max(i for i, m in enumerate(self.members) if m.op.get_name() in closed) + 1
        head, rest = self.members[:cut], self.members[cut:]
        self.members = head
        self.close_run()
        for m in rest:
            self.members.append(m)
            self.member_names.add(m.op.get_name())
            if m.levels is not None:
                self.tiled[m.op.get_name()] = m
        self._run = None

    def retile(self, levels: dict[str, list[Level]]) -> None:
        """Every tiled member takes its levels under a refined loop (``refine``)."""
        self.members = [m if m.levels is None else _Member(m.op, list(levels[m.op.get_name()]), m.rule)
                        for m in self.members]
        self.tiled = {}
        self.axes = RunAxes()
        for m in self.members:  # the indices again, as if each had joined with its new levels
            self.axes.link(m.op, m.levels, self.loop, next(iter(self.tiled), None), self.tiled)
            if m.levels is not None:
                self.tiled[m.op.get_name()] = m
        self._run = None

    def plan_of(self, op: Any) -> Any:
        decision = self.ev.decide(op)
        if decision.error is not None:
            decision = self.joint_plan(op, decision)
        self.decisions[op.get_name()] = decision
        if decision.error is not None:
            raise decision.error
        return None if decision.plan is None else plan_record(decision.plan)

    def joint_plan(self, op: Any, refused: OpDecision) -> OpDecision:
        """``op``'s plan as a per-tile buffer of a loop its one point-for-point reader
        shares (``engine/joint_plans.py``), or ``refused`` when it has none."""
        from spyre_rules.ir.graph_state import graph_state
        from torch._inductor.virtualized import V

        root, ev = self.root, self.ev
        outputs = frozenset(graph_state(V.graph).host_outputs)
        # every op of op's own graph (host steps and extern kernels too): buffer names are
        # the graph's own
        reader = point_reader(op, list(V.graph.operations), outputs)
        if reader is None:
            return refused
        before = ev.loop_local
        ev.loop_local = before | {op.get_name()}
        decision = ev.decide(op)
        if decision.error is not None or decision.plan is None:
            ev.loop_local = before
            return refused
        root.joint[op.get_name()] = JointPlan(reader.get_name(), refused.error)
        return decision

    def close(self, members: list[_Member]) -> None:
        if not members:
            return
        check_joint([(m.op, m.levels) for m in members], self.root.joint)
        # The verifier has the last word on every member's split before any hint is decided.
        for m in members:
            self.ev.veto(m.op, _tiling(m.levels or []), f"grouping rule `{m.rule}`")
        shared = _tiled(members)[0].levels or []
        root = self.root
        ids = list(range(root.next_id, root.next_id + len(shared)))
        root.next_id += len(shared)
        for m in members:
            self.hints[m.op.get_name()] = _hints(m.op, m.levels, shared, ids)
            if not m.levels or not all(lv.is_reduction for lv in m.levels):
                # Only reduction levels: the op writes its whole result after its
                # loop (the accumulator's finalise), which later ops read as any
                # untiled buffer (docs/accumulation.md, "Readers").
                self.auto_tiled.add(m.op.get_name())
        # A level is a reduction level when it tiles a reduction dim of any member
        # (as for user hints: hints/assign.py).
        reduction = [any(m.levels[i].is_reduction for m in _tiled(members))  # type: ignore[index]
                     for i in range(len(shared))]
        self.groups.append(TileGroup([m.op for m in members],
                                     [GroupLevel(i, sympy.Integer(lv.split), red)
                                      for i, lv, red in zip(ids, shared, reduction)]))

    def independent(self, op: Any) -> bool:
        """Whether ``op`` may run before the open run's loop: it mutates nothing and
        every buffer it reads (``order_dependencies``) was last written before the
        run's first member (graph positions: ops the grouping does not visit, host
        steps, count too) or is hoisted.  False in the side stream and with no run."""
        if self.root is not self or not self.members:
            return False
        needs = facts.order_dependencies(op)
        start = self.written.get(self.members[0].op.get_name())
        if needs is None or start is None:
            return False
        # a hoisted op's buffer is ready before the loop unless a later op writes it in
        # place (an index_add into hoisted zeros inside the run: its readers wait for it)
        return all(self.written.get(name, -1) < start
                   or name in self.hoisted and self.last_writer.get(name) == name
                   for name in needs)

    def hoist(self, op: Any) -> TraceStep:
        """``op`` runs before the open run's loop, grouped in the side stream."""
        self.hoisted[op.get_name()] = self.members[0].op.get_name()
        if self.side is None:
            self.side = _Grouper(self.ev, self.hinted, self.written, root=self,
                                 last_writer=self.last_writer)
        return self.side.visit(op)

    def close_side(self) -> None:
        if self.side is not None:
            self.side.close_run()

    def close_run(self) -> None:
        self.close_side()  # its groups run before this run's loop
        members = self.members
        if members:
            self.members = []
            self.member_names = NameLog()  # a new log: views of the old one stay as they were
            self.tiled = {}
            self.axes = RunAxes()
            self._run = None
        # Untiled members after the last tiled one need no loop: they run once, after it.
        while members and members[-1].levels is None:
            members.pop()
        self.close(members)

    def visit(self, op: Any) -> TraceStep:
        cells: dict[str, Any] = {}
        independent = self.independent(op)
        if not independent:
            # an op after the hoisted ones reads their groups closed (full buffers)
            self.close_side()

        def plan() -> Any:
            if "plan" not in cells:
                cells["plan"] = self.plan_of(op)
            return cells["plan"]

        def carried() -> Carry | None:
            if "carried" not in cells:
                cells["carried"] = carry(op, self.tiled, self.loop)
            return cells["carried"]

        def refined() -> Any:
            if "refined" not in cells:
                own = plan()
                cells["refined"] = None if own is None else refine(op, own.levels, self.tiled,
                                                                   self.loop, self.axes,
                                                                   self.ev.legal_splits)
            found = cells["refined"]
            return None if found is None else found[0]

        def aligned() -> Carry | None:
            if "aligned" not in cells:
                own = plan() if independent else None
                cells["aligned"] = None if own is None else align(own.levels, self.loop)
            return cells["aligned"]

        env = self.ev.env(op=op, plan=Lazy(plan), carried=Lazy(carried), run=self.run_value(),
                          aligned=Lazy(aligned),
                          refined=Lazy(refined), independent=independent,
                          # built when a rule reads it (only planned ops reach that rule)
                          auto_tiled_producers=Lazy(self.auto_tiled_value),
                          hinted_producers=self.hinted)
        fired = self.ev.first_match(self.ev.program.grouping, env, op)
        if fired is None:
            self.close_run()
            return TraceStep("grouping", "(no rule)", "pass", None, {"op": op})
        rule, message = fired
        action = rule.action
        step = self.ev.trace[-1]
        name = op.get_name()
        if action == "reject":
            raise Unsupported(message or rule.name)
        if action == "hoist":
            if not independent:
                raise Unsupported(f"grouping rule `{rule.name}` hoists {name} before the open "
                                  "run's loop, but it is not independent of the run")
            return self.hoist(op)
        if action == "pass":
            self.close_run()
        elif action == "conform":
            # an op independent of the run carries nothing through reads: its own
            # planned dims take the run's split level by level (`aligned`)
            through = carried() if carried() is not None or not independent else aligned()
            if through is None:
                raise Unsupported(f"grouping rule `{rule.name}` conforms {name} to the open run, "
                                  "but its reads of the run carry no split onto its dims")
            self.add(op, through.levels, rule.name)
        elif action == "refine":
            if refined() is None:
                raise Unsupported(f"grouping rule `{rule.name}` refines the open run to {name}'s "
                                  "plan, but its plan cannot be carried onto the run")
            record, levels = cells["refined"]
            self.split_run(record.closed)
            self.retile(levels)
            self.add(op, record.levels, rule.name)
        elif action == "join" and plan() is None:
            if not self.tiled:
                raise Unsupported(f"grouping rule `{rule.name}` joins {name}, which has no plan, "
                                  "but no run is open")
            # looked up per read, not a copy of the run per op
            reads_tiled = sorted(n for n in facts.read_buffers(op) if n in self.tiled)
            if reads_tiled:
                # Untiled, it would read a per-tile buffer as if it were the whole tensor.
                raise Unsupported(f"grouping rule `{rule.name}` joins {name}, which has no plan, "
                                  f"untiled to the open run, but it reads "
                                  f"{reads_tiled} of the run")
            self.add(op, None, rule.name)
        elif action in ("join", "start", "single"):
            own = plan()
            if own is None:
                raise Unsupported(f"grouping rule `{rule.name}` decided `{action}` for "
                                  f"{name}, which has no plan")
            if action == "join":
                if not self.members or _splits(own.levels) != _splits(self.loop):
                    raise Unsupported(f"grouping rule `{rule.name}` joins {name} to a run "
                                      f"with another split ({own.tiling!r} vs "
                                      f"{self.run_value().tiling!r})")
                self.add(op, own.levels, rule.name)
            elif action == "start":
                self.close_run()
                self.add(op, own.levels, rule.name)
            else:
                self.close_run()
                self.close([_Member(op, list(own.levels), rule.name)])
        return step


def _hints(op: Any, levels: list[Level] | None, shared: list[Level],
           ids: list[int]) -> tuple[AutoHint, ...]:
    """One hint per level: the op's loop variable of that host dim (no loop
    variable and no host dim for a loop-invariant member: ``levels`` None)."""
    if levels is None:
        return tuple(AutoHint(hint_id, None, level.split, None, False)
                     for level, hint_id in zip(shared, ids))
    snapshot = facts.op_facts(op)
    positions = snapshot.position_vars or []
    by_split_dim = {d: s for s, d in snapshot.reduction_dims.items()}
    hints = []
    for level, hint_id in zip(levels, ids):
        host_dim = level.host_dim
        if level.is_reduction:  # split dim rank + r: the DimHint indexes reduction_ranges
            var = by_split_dim.get(level.host_dim)
            host_dim = level.host_dim - len(positions)
        else:
            var = positions[level.host_dim] if level.host_dim < len(positions) else None
        if not isinstance(var, sympy.Symbol):
            raise Unsupported(f"Cannot auto-tile {op.get_name()}: host dim {level.host_dim} has no "
                              "loop variable of its own to tile")
        hints.append(AutoHint(hint_id, host_dim, level.split, var, level.is_reduction))
    return tuple(hints)


def write_positions(operations: Sequence[Any]) -> dict[str, int]:
    """Buffer name -> position of the last op in ``operations`` that writes it
    (its own output, or a buffer it mutates)."""
    written: dict[str, int] = {}
    for i, op in enumerate(operations):
        written[op.get_name()] = i
        for name in getattr(op, "get_mutation_names", lambda: ())():
            written[name] = i
    return written


def last_writers(operations: Sequence[Any]) -> dict[str, str]:
    """Buffer name -> the name of the last op in ``operations`` that writes it."""
    writers: dict[str, str] = {}
    for op in operations:
        writers[op.get_name()] = op.get_name()
        for name in getattr(op, "get_mutation_names", lambda: ())():
            writers[name] = op.get_name()
    return writers


def decide_groups(operations: Sequence[Any], max_cores: int | None = None,
                  trace: list[TraceStep] | None = None,
                  graph_operations: Sequence[Any] | None = None) -> GroupingOutcome:
    """Run the grouping section over ``operations`` (graph order); see the module doc.
    Reads the ops, never writes them.

    ``trace``, when given, receives every step the grouping evaluator records
    (grouping rules, ``conforms``, the planner decisions it reads), also when
    grouping raises Unsupported: ``spyre-rules test`` reads it for coverage.
    ``graph_operations``: every op of the graph in order (host steps too), which
    decides what a hoisted op may move past; default ``operations``."""
    # grouping reads the ops, never edits them (the applying pass does); engine/collector.py
    with memo.stable(), existing_objects_frozen():
        every = operations if graph_operations is None else graph_operations
        return _decide_groups(operations, max_cores, trace, write_positions(every),
                              last_writers(every))


def _decide_groups(operations: Sequence[Any], max_cores: int | None,
                   trace: list[TraceStep] | None, written: dict[str, int],
                   last_writer: dict[str, str] | None = None) -> GroupingOutcome:
    ev = evaluator(max_cores)
    if trace is not None:
        ev.trace = trace
    hinted = frozenset(op.get_name() for op in operations
                       if facts.is_computed_buffer(op) and facts.has_user_hints(op))
    grouper = _Grouper(ev, hinted, written, last_writer=last_writer)
    actions: dict[str, TraceStep] = {}
    with graph_scope(operations) as graph_of:
        for op in operations:
            with graph_of(op):
                _require_graph(op)
                actions[op.get_name()] = grouper.visit(op)
        grouper.close_run()
    return GroupingOutcome(grouper.groups, actions, grouper.decisions, grouper.hints,
                           dict(grouper.hoisted))
