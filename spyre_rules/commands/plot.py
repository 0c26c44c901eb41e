"""``--plot FILE`` of ``explain`` and ``demo``: each op's worst span against the limit.

One figure per graph (``FILE``; a program with several graphs also writes
``STEM_graph_N.SUFFIX`` for the others), PNG or SVG by the suffix.  Per op:
its worst per-core span before tiling and on the per-tile view of its plan
(log scale, the limit as a line), its split levels and the rule that decided.
"After" is the tiling the op runs: its coarse-tile group's split when grouping
put it in one (a consumer may conform to its run's split), else its own plan.
The spans are the planner's measures (the ``output_coords`` and, for
Reductions, ``read_coords`` facts, as rules/planner.rules' candidates measure
them: non-stick coordinates with a proven bound).

matplotlib is an optional extra: ``pip install 'spyre-rules[plot]'``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

__all__ = ["PlotError", "OpSpans", "check_plot_path", "measure", "plot_program", "write_figures"]

SUFFIXES = (".png", ".svg")
MISSING = ("--plot needs matplotlib, an optional extra: pip install 'spyre-rules[plot]' "
           "(or pip install matplotlib)")


class PlotError(Exception):
    """--plot cannot be honoured (bad suffix, matplotlib missing): a usage error."""


@dataclasses.dataclass(frozen=True)
class OpSpans:
    op: str
    graph: int
    decision: str                    # plan / no plan / unsupported
    splits: tuple[tuple[int, int], ...]   # the levels it runs (its group's, else its plan's)
    rule: str                        # the grouping rule that grouped it, else the planner's
    before: int | None               # worst span untiled (None: not measurable)
    after: int | None                # worst span on the per-tile view of the plan


def check_plot_path(path: str) -> Path:
    """The plot file, after checking its suffix and that matplotlib imports."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise PlotError(f"--plot {path}: the suffix must be .png or .svg")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotError(MISSING) from None
    return p


def _worst(op: Any, tile: Any) -> int | None:
    from spyre_rules.facts import op_facts as facts

    try:
        coords = list(facts.output_coords(op, tile))
        if facts.is_reduction(op):
            for read in facts.input_reads(op):
                coords += facts.read_coords(op, read, tile)
    except Exception:  # noqa: BLE001 - ops the planner skips may not be measurable
        return None
    spans = [c.span_bytes for c in coords if not c.is_stick and c.symbols and c.span_bytes is not None]
    return max(spans, default=None)


def measure(ops: Any, decisions: list[Any], grouped: dict[str, tuple[tuple[tuple[int, int], ...], str]]
            ) -> list[OpSpans]:
    """Per decided op: worst span before and after its tiling (facts need each op's graph).
    ``grouped``: op -> (its group's levels, the grouping rule) for grouped ops."""
    from spyre_rules.commands.policy_runner import deciding_rule
    from spyre_rules.engine.values import Tiling

    graph_of = {}
    for index, graph in enumerate(getattr(ops, "graphs", []) or []):
        for op in getattr(graph, "operations", ()):
            graph_of[op.get_name()] = index
    by_name = {op.get_name(): op for op in ops}
    out = []
    for d in decisions:
        op = by_name[d.op]
        index = graph_of.get(d.op, 0)
        splits = tuple(d.plan.splits) if d.plan is not None else ()
        rule = deciding_rule(d)
        if d.op in grouped:
            splits, rule = grouped[d.op]
        with ops.graph_context(index):
            before = _worst(op, Tiling(()))
            after = _worst(op, Tiling.of(splits)) if splits else before
        out.append(OpSpans(d.op, index, d.decision, splits, rule, before, after))
    return out


def _figure(rows: list[OpSpans], limit: int, title: str) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from spyre_rules.engine.records import NO_PLAN, PLAN, UNSUPPORTED

    n = len(rows)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.6 * n + 3.0), 5.0), dpi=100)
    xs = list(range(n))
    width = 0.38
    colours = {PLAN: "#2b7a3d", NO_PLAN: "#7f7f7f", UNSUPPORTED: "#b03a2e"}
    for x, r in zip(xs, rows):
        if r.before is not None:
            ax.bar(x - width / 2, r.before, width, color="#d9a441", edgecolor="black", linewidth=0.5)
        if r.after is not None:
            ax.bar(x + width / 2, r.after, width, color=colours.get(r.decision, "#4a6fa5"),
                   edgecolor="black", linewidth=0.5)
    ax.axhline(limit, color="black", linestyle="--", linewidth=1)
    ax.text(n - 0.5, limit, f" limit {limit:,} B", va="bottom", ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("worst per-core span (bytes, log scale)")
    labels = []
    for r in rows:
        levels = " ".join(f"({h}, {k})" for h, k in r.splits) or "-"
        labels.append(f"{r.op}\n{r.decision}\n{levels}\n{r.rule}")
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_xlim(-0.6, n - 0.4)
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color="#d9a441", label="before tiling"),
                       Patch(color=colours[PLAN], label="after tiling (plan)"),
                       Patch(color=colours[NO_PLAN], label="no plan (unchanged)"),
                       Patch(color=colours[UNSUPPORTED], label="unsupported (unchanged)")],
              fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def write_figures(rows: list[OpSpans], limit: int, path: Path, title: str) -> list[Path]:
    """One figure per graph; the paths written."""
    from matplotlib import pyplot as plt

    from spyre_rules.engine.records import NO_PLAN, PLAN, UNSUPPORTED

    graphs = sorted({r.graph for r in rows}) or [0]
    written = []
    for index in graphs:
        target = path if index == graphs[0] else path.with_name(f"{path.stem}_graph_{index}{path.suffix}")
        fig = _figure([r for r in rows if r.graph == index], limit, f"{title} -- graph {index}")
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, format=target.suffix.lower().lstrip("."))
        plt.close(fig)
        written.append(target)
    return written


def plot_program(fn: Any, inputs: list[Any], settings: dict[str, Any], path: Path, title: str) -> list[Path]:
    """Capture ``fn(*inputs)``, decide every op under ``settings`` and plot it."""
    import spyre_rules
    from spyre_rules import config
    from spyre_rules.engine import plan_graph

    from spyre_rules.commands.policy_runner import run_grouping

    # captured under the settings too: the seam's edits may depend on the limit
    # (backend/gathered_windows.py)
    with config.patch(**settings):
        ops = spyre_rules.capture_operations(fn, *inputs)
        decisions = plan_graph(ops)
        groups, actions, _error = run_grouping(ops, [])
        grouped = {name: (g.member_splits.get(name, g.splits), f"grouping.{actions[name].rule}")
                   for g in groups or [] for name in g.ops if name in actions}
        rows = measure(ops, decisions, grouped)
        limit = config.max_span_bytes
    return write_figures(rows, limit, path, title)
