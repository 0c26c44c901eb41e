"""Where each buffer's current value lives while the wrapper is written.

A buffer a host step touches can have two copies: a host tensor in the wrapper
and a segment of simulated device memory.  Which copy is current depends on the
order of the writes, so transfers are decided in code generation order (the
order the wrapper runs), not from who produced a buffer:

* a Spyre kernel's writes make the device copy current and the host copy stale,
  except for the graph outputs the kernel unstickifies itself and the graph inputs
  it writes through (executor/write_through.py);
* a host step's writes -- its outputs *and every buffer it mutates in place*
  (``scatter_add_`` into a device-made buffer, a collective's ``wait_tensor``) --
  make the host copy current and the device copy stale.

A host step reads a buffer whose host copy is stale through ``rules_to_host``
right before it; a kernel reads a buffer whose device copy is stale after a
``rules_to_device`` right before it.  So a buffer is stickified after the *last*
host write before a device read (never between a collective and its wait), and
a host step that mutates a device-made buffer starts from the device's values.
Graph inputs and constants are stickified by every kernel that reads them
(``stickify`` of the kernel), so they are never stale on the device.

docs/architecture.md, "Host steps".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from spyre_rules.ir.graph_state import RulesGraphState

__all__ = ["written_names", "mutated_names", "stale_on_device", "stale_on_host", "kernel_wrote",
           "host_step_wrote", "host_copy_taken"]


def written_names(op: Any) -> list[str]:
    """Every buffer ``op`` writes: its outputs and the buffers they mutate."""
    names: list[str] = []
    for out in op.get_outputs():
        names.append(out.get_name())
        names.extend(out.get_mutation_names())
    names.extend(op.get_mutation_names())
    return list(dict.fromkeys(names))


def mutated_names(op: Any) -> list[str]:
    """The buffers ``op`` changes in place: it reads them too (``scatter_add_`` adds
    into their values), whatever its dependencies say."""
    own = {out.get_name() for out in op.get_outputs()}
    return [name for name in written_names(op) if name not in own]


def stale_on_device(state: RulesGraphState, names: Iterable[str]) -> list[str]:
    """The buffers among ``names`` a kernel must stickify before it runs (their
    last write was a host step's); they are current on the device afterwards."""
    stale = [n for n in dict.fromkeys(names) if n in state.device_stale]
    state.device_stale.difference_update(stale)
    return stale


def stale_on_host(state: RulesGraphState, name: str) -> bool:
    """Whether a host step reading ``name`` must unstickify it first."""
    return name in state.host_stale


def host_copy_taken(state: RulesGraphState, name: str) -> None:
    """``name`` was unstickified: its host copy is current again."""
    state.host_stale.discard(name)


def kernel_wrote(state: RulesGraphState, names: Iterable[str], unstickified: Iterable[str]) -> None:
    copied = set(unstickified)
    for name in names:
        state.device_stale.discard(name)
        if name in copied:
            state.host_stale.discard(name)
        else:
            state.host_stale.add(name)


def host_step_wrote(state: RulesGraphState, names: Iterable[str]) -> None:
    inputs = state.host_input_set()  # kept by the state: not rebuilt per host step
    for name in names:
        state.host_stale.discard(name)
        if name in state.layouts and name not in inputs:
            state.device_stale.add(name)
