"""torch implementations of Inductor's pointwise op names (OpsHandler semantics).

Operands are tensors (or Python scalars) in *compute form*: half-precision
values are held as float32 after rounding (see ``executor/dtypes.py``), so each op here
computes in float32 like Inductor's CPU kernels and eager's vectorized CPU
kernels do; the result is rounded when it is converted or stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["POINTWISE_OPS", "apply_pointwise"]


def _truncdiv(a: Any, b: Any) -> Any:
    return torch.div(a, b, rounding_mode="trunc")


def _floordiv(a: Any, b: Any) -> Any:
    return torch.div(a, b, rounding_mode="floor")


def _tensor(x: Any) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.tensor(x)


def _where(c: Any, a: Any, b: Any) -> Any:
    return torch.where(_tensor(c).bool(), a, b)


def _unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Any], Any]:
    return lambda x: fn(_tensor(x))


def _relu(x: Any) -> Any:
    x = _tensor(x)
    if x.dtype == torch.bool:  # torch.relu refuses bool; relu of a bool is the bool
        return x
    return torch.relu(x)  # eager's own: NaN stays NaN, -0.0 stays -0.0


def _identity(x: Any) -> Any:
    return x


POINTWISE_OPS: dict[str, Callable[..., Any]] = {
    # arithmetic
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "truediv": torch.true_divide,
    "div_rn": torch.true_divide,
    "floordiv": _floordiv,
    "truncdiv": _truncdiv,
    "mod": torch.fmod,  # C-style: sign of the dividend
    "fmod": torch.fmod,
    "remainder": torch.remainder,  # Python-style: sign of the divisor
    "pow": torch.pow,
    "neg": torch.neg,
    "abs": torch.abs,
    "reciprocal": torch.reciprocal,
    "square": torch.square,
    "minimum": torch.minimum,
    "maximum": torch.maximum,
    "fma": lambda a, b, c: a * b + c,
    "identity": _identity,
    "copysign": torch.copysign,
    "hypot": torch.hypot,
    "atan2": torch.atan2,
    "nextafter": torch.nextafter,
    # unary math
    "exp": _unary(torch.exp),
    "exp2": _unary(torch.exp2),
    "expm1": _unary(torch.expm1),
    "log": _unary(torch.log),
    "log2": _unary(torch.log2),
    "log10": _unary(torch.log10),
    "log1p": _unary(torch.log1p),
    "sqrt": _unary(torch.sqrt),
    "rsqrt": _unary(torch.rsqrt),
    "sin": _unary(torch.sin),
    "cos": _unary(torch.cos),
    "tan": _unary(torch.tan),
    "asin": _unary(torch.asin),
    "acos": _unary(torch.acos),
    "atan": _unary(torch.atan),
    "sinh": _unary(torch.sinh),
    "cosh": _unary(torch.cosh),
    "tanh": _unary(torch.tanh),
    "asinh": _unary(torch.asinh),
    "acosh": _unary(torch.acosh),
    "atanh": _unary(torch.atanh),
    "sigmoid": _unary(torch.sigmoid),
    "relu": _relu,
    "erf": _unary(torch.erf),
    "erfc": _unary(torch.erfc),
    "erfinv": _unary(torch.erfinv),
    "lgamma": _unary(torch.lgamma),
    "digamma": _unary(torch.digamma),
    "sign": _unary(torch.sign),
    "signbit": _unary(torch.signbit),
    "floor": _unary(torch.floor),
    "ceil": _unary(torch.ceil),
    "trunc": _unary(torch.trunc),
    "round": _unary(torch.round),
    "isinf": _unary(torch.isinf),
    "isnan": _unary(torch.isnan),
    # comparisons and logic
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "logical_and": lambda a, b: torch.logical_and(_tensor(a), _tensor(b)),
    "logical_or": lambda a, b: torch.logical_or(_tensor(a), _tensor(b)),
    "logical_xor": lambda a, b: torch.logical_xor(_tensor(a), _tensor(b)),
    "logical_not": lambda a: torch.logical_not(_tensor(a)),
    "and_": lambda a, b: _tensor(a) & _tensor(b),
    "or_": lambda a, b: _tensor(a) | _tensor(b),
    "xor": lambda a, b: _tensor(a) ^ _tensor(b),
    "bitwise_and": lambda a, b: torch.bitwise_and(_tensor(a), b),
    "bitwise_or": lambda a, b: torch.bitwise_or(_tensor(a), b),
    "bitwise_xor": lambda a, b: torch.bitwise_xor(_tensor(a), b),
    "bitwise_not": lambda a: torch.bitwise_not(_tensor(a)),
    "bitwise_left_shift": lambda a, b: torch.bitwise_left_shift(_tensor(a), b),
    "bitwise_right_shift": lambda a, b: torch.bitwise_right_shift(_tensor(a), b),
    "where": _where,
}


def apply_pointwise(name: str, args: list[Any]) -> Any:
    return POINTWISE_OPS[name](*args)
