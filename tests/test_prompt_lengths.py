"""Every prompt length plans at real size with few loop trips (issue 40).

One Llama-3-8B layer (and one Qwen2-7B layer) planned on the meta device at the
real 256 MiB limit, as ``spyre-rules plan MODEL --seq N --layers 1`` does, at
lengths the exact-counts-first policy got wrong:

* 12289 (prime) and 16052 (4 x 4013) were refused: "Cannot auto-tile buf71
  (aten ops: amax.default): it reads already auto-tiled producer(s) ['buf65']"
  -- the scores' exact query blocks cut the sticks of the softmax's row
  statistics (query rows are their stick dim), and the run could not be refined
  to a count every member may run;
* Qwen2-7B at 16381 was refused the same way;
* 8191 (prime) ran the MLP and the LM head in 8191 one-token tiles (41,007 loop
  trips; 86 at 8192): an exact count always won over a remainder split.

Each plan takes ~10-20 s of CPU (bench/bench_lengths.py prints the table over
four models and 17 lengths each).  Loop trips: the sum over loop groups of the
product of their tile counts.
"""

from __future__ import annotations

import math

import pytest

from spyre_rules.commands.model_plan import plan_model


def _groups(report):
    return [g["tiles"] for graph in report["graphs"] for g in graph["loop_groups"]]


CASES = {
    # model, seq: loop groups' tiles in program order (their trips sum to the second value);
    # attention's loop runs over the kv heads and the query heads of each ([8, 4]: 32 heads)
    ("Llama-3-8B", 8191): ([[4], [8, 4], [4, 4], [2], [8, 4]], 86),
    # (12289 and 16052 plan too: bench/bench_lengths.py; the policy tests pin the
    # remainder query blocks and the refined count at reduced scale)
    ("Qwen2-7B", 16381): ([[5], [2], [2], [4], [4, 7, 4], [3], [5, 5], [5], [20, 5]], 258),
}


@pytest.mark.parametrize("model,seq", sorted(CASES))
def test_odd_prompt_length_plans_with_its_loop_groups(model, seq):
    report = plan_model(model, seq=seq, layers=1)
    assert report["error"] is None and report["unsupported"] == [], report["error"]
    assert report["ok"] and report["overflows"] == []
    groups, trips = CASES[model, seq]
    assert (_groups(report), sum(math.prod(t) for t in _groups(report))) == (groups, trips)
