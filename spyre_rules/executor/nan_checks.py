"""The NaN checks of a kernel run's native half stores, put off and merged.

A native half op (``native_half``) stores torch's result, whose NaNs may carry any
sign and payload; each must become the canonical NaN (``dtypes.canonical_stored``)
before anything that could see those bits reads it.  Finding a NaN costs one
reduction over the stored block, as much as a third of the op.  So within one kernel
run (``loops.run_items``) the checks are put off:

* **Chains.**  Every op in ``native_half.NATIVE`` makes a NaN of any operand a NaN
  of its result at the same point.  When a native op reads the newest unchecked store
  (the *head* of the newest chain) whole and point for point, a NaN there is a NaN
  of its result: its store joins the chain as the new head, and one check of the
  head covers the chain.
* **Independent chains.**  Any other native op starts a new chain, unless it would
  write over a chain's head (the head's check would then see other bytes): that
  checks every chain first.  A native op may read unchecked NaNs: its result depends
  on a NaN's bits only in its own NaNs, which its own check covers.  An op that
  overwrites an older, non-head store of a chain is harmless: making the NaNs of
  that range canonical later only replaces NaNs.
* **Anything else checks first.**  A program that is not a native store (the float32
  route, a reduction, a conversion that keeps a NaN's bits) checks every chain before
  it runs, and so does the end of the kernel run, before the host reads anything.
* **Merged check.**  Several chains' heads that lie close together in one memory (a
  counted loop's tiles of one buffer) are checked with one sum over the range they
  span; only if that finds a NaN (or an inf of each sign) is each head checked on its
  own.  Bytes in the range that are no head only cost a closer look.
"""

from __future__ import annotations

import torch

from spyre_rules.executor import dtypes

__all__ = ["CHAINS", "Deferred", "counts"]

#: blocks stored natively, and chains (or blocks) whose NaNs were made canonical
#: (tests prove which route ran)
counts = {"native": 0, "canonical": 0}

#: most chains held at once (past it they are checked: a bound, not a policy)
CHAINS = 64


class Deferred:
    """The unchecked native stores of one kernel run (module docstring)."""

    __slots__ = ("chains", "memory", "dtype")

    def __init__(self) -> None:
        #: chains oldest first; each its stores oldest first as (view, the view's
        #: contiguous runs in memory order (``native_half._memory_order``): the operand
        #: of its own check, and the lowest and highest element the runs touch)
        self.chains: list[list[tuple[torch.Tensor, torch.Tensor, int, int]]] = []
        #: the memory and dtype of every store held
        self.memory = None
        self.dtype: torch.dtype | None = None

    def head(self) -> torch.Tensor | None:
        return self.chains[-1][-1][0] if self.chains else None

    def before_store(self, memory, runs: torch.Tensor) -> None:
        """A native store will write ``runs`` (a view of ``memory``): check the chains
        first if that may overwrite a head (or mix memories or dtypes)."""
        if not self.chains:
            return
        if memory is not self.memory or runs.dtype != self.dtype:
            self.flush()
            return
        low, high = _extent(runs)
        for chain in self.chains:
            _, head, h_low, h_high = chain[-1]
            if low <= h_high and h_low <= high and _may_overlap(runs, head):
                self.flush()
                return

    def add(self, view: torch.Tensor, runs: torch.Tensor, memory, extends: bool) -> None:
        """A native store, unchecked: the new head of the newest chain (``extends``: it
        read that head whole, point for point) or of a new chain.  ``before_store``
        ran for it."""
        entry = (view, runs, *_extent(runs))
        if extends:
            self.chains[-1].append(entry)
            return
        if len(self.chains) >= CHAINS:
            self.flush()
        if not self.chains:
            self.memory, self.dtype = memory, runs.dtype
        self.chains.append([entry])

    def drop_newest(self, had_nan: bool) -> None:
        """The newest chain's NaNs are settled by a check of a later store made aside
        (``had_nan``: it found one, so make the chain's NaNs canonical)."""
        chain = self.chains.pop()
        if had_nan:
            _canonicalise(chain)

    def flush(self) -> None:
        """Check every chain now; make each NaN of a chain that has one canonical."""
        chains = self.chains
        if not chains:
            return
        self.chains = []
        if len(chains) > 1:
            low = min(chain[-1][2] for chain in chains)
            span = max(chain[-1][3] for chain in chains) - low + 1
            if span <= 2 * sum(chain[-1][1].numel() for chain in chains) and \
                    not dtypes.has_nan(self.memory.strided(self.dtype, (span,), (1,), low)):
                return
        for chain in chains:
            if dtypes.has_nan(chain[-1][1]):
                _canonicalise(chain)


def _extent(runs: torch.Tensor) -> tuple[int, int]:
    low = runs.storage_offset()
    return low, low + sum((n - 1) * s for n, s in zip(runs.shape, runs.stride()))


def _may_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two views whose extents intersect may share an element.  Disjoint
    for sure: the same ``n`` runs of ``L`` elements ``S`` apart (a counted loop's tiles
    of a stick layout), with offsets ``d`` apart where ``L <= d mod S <= S - L`` (an
    element of each would need ``d = (q_a - q_b) S + (t_b - t_a)``, ``|t_b - t_a| < L``)."""
    if a.dim() != 2 or a.shape != b.shape or a.stride() != b.stride() or a.stride(1) != 1:
        return True
    length, step = a.shape[1], a.stride(0)
    if length > step:
        return True
    rest = (a.storage_offset() - b.storage_offset()) % step
    return not length <= rest <= step - length


def _canonicalise(chain: list[tuple[torch.Tensor, torch.Tensor, int, int]]) -> None:
    for view, *_ in chain:
        dtypes.canonical_nans_(view)
    counts["canonical"] += 1
