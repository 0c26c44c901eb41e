"""Bind an OpSpec's compiled program (``evaluate._Program``) to one run and execute it.

The program of a spec is compiled once and looked up by the spec's fingerprint
(``compiled.py``); a run binds it to that run's memories and loop offsets.
"""

from __future__ import annotations

from spyre_rules.executor import compiled, nan_checks
from spyre_rules.executor.evaluate import _Program
from spyre_rules.executor.hbm import DeviceMemory
from spyre_rules.program.op_spec import OpSpec

__all__ = ["bound_program", "run_op_spec"]


def run_op_spec(spec: OpSpec, memory: DeviceMemory, where: str = "",
                shifts: list[int] | None = None, lx: DeviceMemory | None = None,
                checked: dict[tuple[int, int | None], tuple[OpSpec, _Program]] | None = None,
                deferred: nan_checks.Deferred | None = None) -> None:
    """Execute ``spec`` (``where`` prefixes the op in error messages, e.g. the kernel).

    ``shifts``: per arg, the byte offset a counted loop applies this iteration
    (``codegen.loops``); the bounds check stays against the arg's allocation.
    ``lx``: the LX scratchpad memory for args allocated ``{'lx': off}``.
    ``checked``: the programs whose specs were fingerprinted earlier in this same
    kernel run (``loops.run_items``); nothing edits a spec while its kernel runs, so
    a later iteration of a counted loop reuses the program without a fingerprint.
    ``deferred``: the kernel run's NaN checks put off so far (``nan_checks.Deferred``).
    """
    program = bound_program(spec, memory, where, shifts, lx, checked)
    try:
        program.run(deferred)
    finally:
        program.release()


def bound_program(spec: OpSpec, memory: DeviceMemory, where: str = "",
                  shifts: list[int] | None = None, lx: DeviceMemory | None = None,
                  checked: dict[tuple[int, int | None], tuple[OpSpec, _Program]] | None = None
                  ) -> _Program:
    """The spec's compiled program bound to this run (``run_op_spec``'s arguments);
    the caller runs it and releases it.  A counted loop keeps it bound for the
    kernel run and only moves its offsets per iteration (``_Program.move``)."""
    memories = {"hbm": memory}
    if lx is not None:
        memories["lx"] = lx
    # the number of shifts decides how many args get accesses (zip), so it is keyed
    count = None if shifts is None else len(shifts)
    hit = None if checked is None else checked.get((id(spec), count))
    if hit is not None and hit[0] is spec:
        program = hit[1]
        program.bind(where, memories, shifts)
    else:
        key, keep = compiled.fingerprint(spec, count)
        program = compiled.lookup(spec, key)
        if program is None:
            program = _Program(spec, where, memories, shifts)
            compiled.remember(spec, key, keep, program)
        else:
            program.bind(where, memories, shifts)
        if checked is not None:
            checked[(id(spec), count)] = (spec, program)
    return program
