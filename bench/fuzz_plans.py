"""Every plan the user reads is a plan the program runs.

``plan.json`` records each op's tiling levels; the differential fuzzer compiles every
case with a dump dir and checks, for a program that compiled, that each record with
levels belongs to an op some kernel of the program writes (its own buffer, or the
concatenation its tiles are written into).  A fill Inductor inlined into its readers,
or a Welford output nothing reads, was planned and recorded while no kernel ran it
(issue 29: ``torch.full`` under ``spyre_hint(slices={"M": 4})`` recorded ``[[0, 4]]``
and the program had no loop).
"""

from __future__ import annotations

import json
from pathlib import Path

from spyre_rules.program.op_spec import iter_op_specs

__all__ = ["unrun_plans"]

_INTO = "writes its tiles into "


def _written(kernels) -> set[str]:
    return {arg.name for k in kernels for spec in iter_op_specs(k.specs)
            for arg in spec.args if not arg.is_input}


def unrun_plans(dump_dir: str | Path, kernels) -> tuple[str, ...]:
    """One line per plan record with levels whose op no kernel writes."""
    written = _written(kernels)
    found = []
    for path in sorted(Path(dump_dir).glob("**/plan.json")):
        for record in json.loads(path.read_text())["ops"]:
            if not record.get("levels"):
                continue
            propagation = (record.get("loop") or {}).get("propagation") or ""
            into = propagation[len(_INTO):] if propagation.startswith(_INTO) else None
            if record["op"] not in written and into not in written:
                found.append(f"{record.get('description', record['op'])} has the recorded levels "
                             f"{record['levels']} ({record.get('decision')}) but no kernel writes it")
    return tuple(found)
