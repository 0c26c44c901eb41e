"""Run one collectives policy test: a collective step's buffers, laid out as the backend
lays out a fresh tensor (``fixed_tiled_layout``), chunked by the policy under test
(codegen/collective_spans.py ``plan_chunks``), compared with the chunking expected.
No process group: the chunking depends on the layouts and the span limit only."""

from __future__ import annotations

from typing import Any

from spyre_rules.commands.policy_files import PolicyTest

__all__ = ["run_collective_test"]


def _render(chunking: Any) -> str:
    if chunking is None:
        return "no chunks"
    return f"{chunking.count} chunks of {chunking.length} along host dim {chunking.dim}"


def run_collective_test(test: PolicyTest, rules_path: str | None,
                        harness_error: type) -> tuple[list[str], list[Any]]:
    """The failure lines of ``test`` (empty: passed) and the steps the policy recorded."""
    import torch

    from spyre_rules import config
    from spyre_rules.codegen.collective_spans import CollectiveBuffer, chunk_dims, plan_chunks
    from spyre_rules.commands.policy_programs import ProgramError, parse_input
    from spyre_rules.engine.policy import get_policy
    from spyre_rules.engine.values import Chunking
    from spyre_rules.facts.tiled_layout import fixed_tiled_layout

    buffers = []
    try:
        for i, (decl, is_input) in enumerate([*((d, True) for d in test.reads),
                                              *((d, False) for d in test.writes)]):
            dtype, shape = parse_input(decl)
            layout = fixed_tiled_layout("cpu", getattr(torch, dtype), list(shape))
            buffers.append(CollectiveBuffer(f"buf{i}", layout, is_input))
    except ProgramError as err:
        raise harness_error(str(err)) from None
    if not chunk_dims(test.collective, len(buffers[0].layout.size)):
        raise harness_error(f"collective {test.collective!r} is not one the backend chunks")
    settings = {"rules_path": rules_path, **test.config}
    steps: list[Any] = []
    with config.patch(**settings):
        chunking = plan_chunks(test.collective, buffers, int(config.max_span_bytes), get_policy(),
                               steps)
    expected = None if test.chunks is None else Chunking(*test.chunks)
    if chunking == expected:
        return [], steps
    return ["  chunks:", f"    - expected: {_render(expected)}", f"    + actual:   {_render(chunking)}",
            *(f"    trace: {step.text()}" for step in steps)], steps
