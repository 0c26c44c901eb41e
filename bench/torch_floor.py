"""The "torch floor" of a bench program: its kernels' op sequence as plain torch calls.

The executor runs one OpSpec per Inductor op, each a pass of torch calls over
simulated device memory.  The floor is the same op sequence (one torch call per
program entry, reductions included) computed ``out=`` into preallocated contiguous
host tensors, with no executor in between: what the one-op-per-kernel
decomposition costs by itself.  ``with_io`` adds the two transfers every call of
the compiled program makes: each graph input copied into its stick layout (the
``[rows, cols]`` fp32 layout is ``[cols/32, rows, 32]``) and the output's
layout change back (timed as a copy of the result into a stick-layout buffer: the
same bytes moved).  Executor time above ``with_io`` is executor overhead (its copies, Python,
layouts torch iterates slowly); eager time below the floor is fusion.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["FLOORS", "floors"]


def _stick_view(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A device buffer for ``t`` (2-D, fp32, 32-element sticks) and ``t``'s shape as a
    view of it."""
    rows, cols = t.shape
    device = torch.empty(cols // 32, rows, 32, dtype=t.dtype)
    return device, device.permute(1, 0, 2)


class _Io:
    """Stickify the graph inputs and unstickify the output, like a compiled call."""

    def __init__(self, inputs: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        self.pairs = []
        for t in inputs:
            if t.dim() == 2:
                _, view = _stick_view(t)
                self.pairs.append((t.view(t.shape[0], -1, 32), view))
            else:
                self.pairs.append((t, torch.empty_like(t)))
        _, self.out_view = _stick_view(out)

    def load(self) -> None:
        for host, device in self.pairs:
            device.copy_(host)

    def store(self, out: torch.Tensor) -> None:
        # the same layout change as the unstickify, in the other direction
        self.out_view.copy_(out.view(out.shape[0], -1, 32))


def _softmax(x: torch.Tensor) -> Callable[[], torch.Tensor]:
    mx, s = torch.empty(x.shape[0], 1), torch.empty(x.shape[0], 1)
    t1, t2, out = (torch.empty_like(x) for _ in range(3))

    def run() -> torch.Tensor:
        torch.amax(x, -1, keepdim=True, out=mx)          # max_0
        torch.sub(x, mx, out=t1)                           # sub_1
        torch.exp(t1, out=t2)                              # exp_2
        torch.sum(t2, -1, keepdim=True, out=s)             # sum_3
        return torch.div(t2, s, out=out)                   # div_4

    return run


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
    n = float(x.shape[-1])
    s0, mean, s2, var, eps, rstd = (torch.empty(x.shape[0], 1) for _ in range(6))
    t, sq, centred, scaled, weighted, out = (torch.empty_like(x) for _ in range(6))

    def run() -> torch.Tensor:
        torch.sum(x, -1, keepdim=True, out=s0)             # sum_0
        torch.div(s0, n, out=mean)                          # getitem_1
        torch.sub(x, mean, out=t)                           # sum_2: sub, square, sum
        torch.square(t, out=sq)
        torch.sum(sq, -1, keepdim=True, out=s2)
        torch.div(s2, n, out=var)                           # getitem_3
        torch.sub(x, mean, out=centred)                     # sub_4
        torch.add(var, 1e-5, out=eps)                       # add_5
        torch.rsqrt(eps, out=rstd)                          # rsqrt_6
        torch.mul(centred, rstd, out=scaled)                # mul_7
        torch.mul(scaled, w, out=weighted)                  # mul_8
        return torch.add(weighted, b, out=out)              # add_9

    return run


def _chain(x: torch.Tensor, y: torch.Tensor) -> Callable[[], torch.Tensor]:
    t1, t2, out = (torch.empty_like(x) for _ in range(3))

    def run() -> torch.Tensor:
        torch.add(x, y, out=t1)                             # add_0
        torch.mul(t1, x, out=t2)                            # mul_1
        return torch.clamp_min(t2, 0, out=out)              # relu_2

    return run


#: bench program name -> builder of its op sequence (inputs -> zero-argument call)
_BUILDERS = {
    "pointwise chain 1024x1024": _chain,
    "softmax 1024x1024": _softmax,
    "layer_norm 1024x1024": _layer_norm,
}


def floors(name: str, inputs: tuple[torch.Tensor, ...]) -> dict[str, Callable[[], object]] | None:
    """``{"floor": ops only, "floor+io": ops and the layout transfers}`` for a bench
    program, None when it has no floor (matmul and fp16 programs)."""
    build = _BUILDERS.get(name)
    if build is None:
        return None
    ops = build(*inputs)
    io = _Io(inputs, ops())

    def with_io() -> object:
        io.load()
        out = ops()
        io.store(out)
        return out

    return {"floor": ops, "floor+io": with_io}


FLOORS = tuple(_BUILDERS)
