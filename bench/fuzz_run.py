"""Compile one fuzz program in one variant, run it and judge it against eager.

Variants (``fuzz_gen.VARIANTS``):

* ``untiled`` -- ``f_plain``, default settings (automatic tiling off);
* ``manual``  -- ``f_hinted`` on named inputs, automatic tiling off;
* ``auto``    -- ``f_plain`` with ``max_span_bytes=limit``, ``sencores``,
  ``ignore_span_overflow_hints=False``;
* ``mixed``   -- ``f_hinted`` on named inputs with the ``auto`` settings.

Every variant compiles through ``torch.compile(fn, backend=...)`` with
``fallback="error"``; the backend given to Dynamo is ``spyre_rules_backend``
itself behind a thin wrapper that only records that compilation started and
ended, so an exception is attributed to its phase exactly:

* raised inside the backend: a *clean refusal* when it is one of the documented
  refusals (``Unsupported`` -- ``UnsupportedGraph``, and ``BackendCompileError``
  which wraps it under ``fallback="error"`` --, ``HintError``, ``CoarseTileError``),
  otherwise a *crash*;
* raised by the compiled program: a *run-time error* when it is one of ours
  (any ``SpyreRulesError``, e.g. ``DeviceMemoryError``, ``LoopAddressError``, or
  the executor's ``DeviceOverflowError``/``StickifyError``/``ExprEvalError``),
  otherwise a *crash*;
* anything before the backend (Dynamo tracing) is a crash of the harness;
* a program whose hint slices a name an op lost (``Program.lost``,
  ``fuzz_lost_names``): in the hinted variants the expected outcome is a clean
  refusal, a ``HintError`` that says where the name was lost; compiling, or a
  refusal of that name that does not say where, is *unexpected* (a failure).

Comparison with eager (``f_plain`` at the program's dtype, which rounds every op
exactly as the executor does: half precision computed in float32 and rounded
per op): bool results must be equal.  Floats: per element
``|compiled - eager| <= 4 * (R * eps + H * eps16 + N * eps32) * bound + R * tiny + H * tiny16``
where
``bound`` is ``f_bound`` (the program on |inputs| in float64 with every
sign-sensitive op replaced by a magnitude bound), ``R`` the rounding steps of
the program plus one, ``H`` its roundings to float16 inside a float32 value (a
cast round trip: a last-bit difference before it can flip the float16 result by
one of its ulps), ``N`` the number of elements its sums/means/matmuls
accumulate (float32 accumulation order differs between the two), ``eps`` the
machine epsilon of the dtype and ``tiny`` its smallest subnormal.  Both sides
differ from the exact value by at most about ``R * eps * bound`` (first order);
the factor 4 covers both sides and the second-order terms.  A tiling or layout
bug reads wrong elements, an error of the order of the values themselves.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import warnings
from pathlib import Path

# Fuzz the tree this file lives in, not whatever spyre_rules is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402
from spyre_rules.backend.compile import spyre_rules_backend  # noqa: E402
from spyre_rules.codegen.span_check import IndirectReadSpanWarning, SpanOverflowWarning  # noqa: E402
from spyre_rules.errors import SpyreRulesError, Unsupported  # noqa: E402
from spyre_rules.executor.dtypes import DeviceOverflowError  # noqa: E402
from spyre_rules.executor.stickify import StickifyError  # noqa: E402
from spyre_rules.program.index_eval import ExprEvalError  # noqa: E402
from spyre_rules.ir.errors import BackendCompileError, find_cause  # noqa: E402
from spyre_rules.hints import (  # noqa: E402
    HintError,
    clear_tensor_dims,
    declare_tensor_dim,
    name_tensor_dims,
    spyre_hint,
)
from spyre_rules.passes.coarse_tile import CoarseTileError  # noqa: E402

import fuzz_paths  # noqa: E402
import fuzz_plans  # noqa: E402
from fuzz_gen import Program  # noqa: E402
from fuzz_lost_names import verdict  # noqa: E402
from fuzz_numerics import SHARE  # noqa: E402

# Dynamo measures every new guard set's latency after a cache flush (tens of ms per
# compiled frame, only logged); each fuzz program is a new frame, so skip it.
torch._dynamo.guards.profile_guard_manager = lambda *args: 0.0

__all__ = ["Result", "run_variant", "variant_settings", "standalone_source", "OUTCOMES"]

OUTCOMES = ("equal", "wrong", "refused", "runtime", "crash", "unexpected")
FAILURES = ("wrong", "runtime", "crash", "unexpected")
CLEAN_REFUSALS = (Unsupported, BackendCompileError, HintError, CoarseTileError)
RUNTIME_ERRORS = (SpyreRulesError, DeviceOverflowError, StickifyError, ExprEvalError)


@dataclasses.dataclass
class Result:
    variant: str
    outcome: str
    message: str = ""
    error: str = ""  # exception class (refusal, run-time error, crash)
    #: the span check's warnings of the run (a user hint may overflow: it wins, the check warns)
    span_warnings: tuple[str, ...] = ()
    #: plan records with levels of an op no kernel of the compiled program writes
    #: (``fuzz_plans``: every recorded plan must be one the program runs)
    unrun_plans: tuple[str, ...] = ()

    @property
    def silent_overflows(self) -> tuple[str, ...]:
        """Span-check warnings whose op's decision says nothing overflows: the planner and
        the span check disagree (every overflow must be answered by the decision)."""
        return tuple(w for w in self.span_warnings
                     if "planner decision: no plan: no span exceeds the limit" in w)


def variant_settings(program: Program, variant: str) -> dict:
    settings: dict = {"fallback": "error"}
    if variant != "untiled":
        settings["unroll_loops"] = program.unroll
    if variant in ("auto", "mixed"):
        settings.update(max_span_bytes=program.limit, sencores=program.sencores,
                        ignore_span_overflow_hints=False)
    return settings


def _namespace(program: Program) -> dict:
    ns = {"torch": torch, "F": F, "spyre_hint": spyre_hint}
    exec(compile(program.functions_source(), f"<fuzz {program.key}>", "exec"), ns)
    return ns


def make_inputs(program: Program, named: bool) -> list[torch.Tensor]:
    clear_tensor_dims()
    for name, size in program.dims.items():
        declare_tensor_dim(name, size)
    g = torch.Generator().manual_seed(program.seed * 100_003 + program.index)
    xs = [torch.randint(0, v.high, list(v.shape), generator=g) if v.dtype == "int64"
          else torch.randn(list(v.shape), generator=g).to(getattr(torch, v.dtype))
          for v in program.inputs]
    if named:
        for x, v in zip(xs, program.inputs):
            name_tensor_dims(x, list(v.names))
    return xs


def _flat(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _flat(v)]


def _claims(program: Program, expected) -> list[str | None]:
    """Per flattened output, its ``Program.exact`` claim (an output may be a tuple)."""
    values = expected if len(program.outputs) > 1 else (expected,)
    claims: list[str | None] = []
    for var, value in zip(program.outputs, values):
        claims += [program.exact.get(var)] * len(_flat(value))
    return claims


def compare(program: Program, actual, expected, bound) -> str | None:
    """None when ``actual`` matches ``expected``; otherwise what differs."""
    claims = _claims(program, expected)
    actual, expected, bound = _flat(actual), _flat(expected), _flat(bound)
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, eager has {len(expected)}"
    rounds, reduced, half = program.rounds() + 1, program.reduced(), program.half_rounds()
    f16 = torch.finfo(torch.float16)
    for i, (a, e, b) in enumerate(zip(actual, expected, bound)):
        if tuple(a.shape) != tuple(e.shape) or a.dtype != e.dtype:
            return f"output {i}: {tuple(a.shape)} {a.dtype}, eager {tuple(e.shape)} {e.dtype}"
        if not e.dtype.is_floating_point:
            if not torch.equal(a, e):
                bad = int((a != e).sum())
                return f"output {i}: {bad}/{e.numel()} elements differ (exact compare)"
            continue
        fi = torch.finfo(e.dtype)
        eps32 = torch.finfo(torch.float32).eps
        tol = (4 * (rounds * fi.eps + half * f16.eps + reduced * eps32) * b
               + rounds * fi.smallest_normal * fi.eps + half * f16.smallest_normal * f16.eps)
        ad, ed = a.double(), e.double()
        finite = torch.isfinite(ed)
        nonfinite_bad = (~finite & ~((ad == ed) | (torch.isnan(ad) & torch.isnan(ed)))).sum()
        diff = torch.where(finite, (ad - ed).abs(), torch.zeros_like(ed))
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
        bad = (diff > tol) & finite
        n_bad = int(bad.sum()) + int(nonfinite_bad)
        if n_bad:
            worst = float((diff - tol).max())
            at = int(torch.argmax(diff - tol))
            return (f"output {i}: {n_bad}/{e.numel()} elements off, max |err| "
                    f"{float(diff.max()):.4g} (worst over tol by {worst:.3g} at flat {at}: "
                    f"got {float(ad.flatten()[at]):.6g}, eager {float(ed.flatten()[at]):.6g})")
        claim = claims[i] if i < len(claims) else None
        if claim is not None:
            differ = ~((ad == ed) | (torch.isnan(ad) & torch.isnan(ed)))
            n_differ = int(differ.sum())
            if claim == "bits" and n_differ or claim == "share" and n_differ > max(1, SHARE * e.numel()):
                at = int(torch.argmax(differ.flatten().to(torch.int8)))
                return (f"output {i}: {n_differ}/{e.numel()} elements differ from eager, where "
                        f"{'none' if claim == 'bits' else f'at most {SHARE:.0%}'} may "
                        f"(rounding where eager rounds; first at flat {at}: got "
                        f"{float(ad.flatten()[at]):.8g}, eager {float(ed.flatten()[at]):.8g})")
    return None


def _error_text(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def run_variant(program: Program, variant: str, check_paths: bool = False) -> Result:
    """Compile, run once, judge against eager; with ``check_paths`` an equal program
    is also run on the executor's general and structured paths (``fuzz_paths``),
    which must agree byte for byte (a difference is a wrong result of one of them).
    The span check's warnings become the result's ``span_warnings``; any other
    warning passes through."""
    with warnings.catch_warnings(record=True) as seen, \
            tempfile.TemporaryDirectory(prefix="spyre-fuzz-") as dump:
        warnings.simplefilter("always")
        result = _run_variant(program, variant, check_paths, dump)
    span = (SpanOverflowWarning, IndirectReadSpanWarning)
    for w in seen:
        if not issubclass(w.category, span):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return dataclasses.replace(result, span_warnings=tuple(
        str(w.message) for w in seen if issubclass(w.category, span)))


def _run_variant(program: Program, variant: str, check_paths: bool, dump: str) -> Result:
    hinted = variant in ("manual", "mixed")
    ns = _namespace(program)
    fn = ns["f_hinted" if hinted else "f_plain"]
    with torch.no_grad():
        try:
            inputs = make_inputs(program, named=hinted)
            expected = ns["f_plain"](*inputs)
            bound = ns["f_bound"](*inputs)
        except Exception as exc:  # noqa: BLE001 - a generator bug, not a compiler outcome
            return Result(variant, "skipped", f"inputs or eager fail: {_error_text(exc)}",
                          type(exc).__name__)
    phase = {"state": "trace", "exc": None}

    def backend(gm, example_inputs):
        phase["state"] = "compile"
        try:
            compiled = spyre_rules_backend(gm, example_inputs)
        except BaseException as exc:
            phase["exc"] = exc
            raise
        phase["state"] = "run"
        return compiled

    try:
        # AOT autograd runs the *first* call of a compiled graph under a dispatch mode
        # that checks custom-op aliasing on every torch op; each program runs once, and
        # the executor's many small ops would pay that check (a third of the run time).
        # It only warns and never changes a value.
        with torch.no_grad(), config.patch(**variant_settings(program, variant), dump_dir=dump), \
                torch._functorch.config.patch(check_custom_op_aliasing=False):
            compiled = torch.compile(fn, backend=backend, dynamic=False)
            before = fuzz_paths.newest_kernel_serial()
            actual = compiled(*inputs)
            message = compare(program, actual, expected, bound) if phase["state"] != "trace" else None
            if message is None and check_paths and phase["state"] != "trace":
                message = fuzz_paths.compare_paths(
                    compiled, inputs, fuzz_paths.kernels_since(before), RUNTIME_ERRORS)
    except Exception as exc:  # noqa: BLE001 - every outcome is classified below
        return _classify(variant, phase, exc, program.lost if hinted else [])
    if phase["state"] == "trace":
        return Result(variant, "crash", "the backend was never called", "")
    if hinted and program.lost:
        return Result(variant, "unexpected", f"compiled, although a hint slices the dim(s) "
                      f"{program.lost} its op lost: expected a HintError saying where")
    unrun = fuzz_plans.unrun_plans(dump, fuzz_paths.kernels_since(before))
    if message is None:
        return Result(variant, "equal", unrun_plans=unrun)
    return Result(variant, "wrong", message, unrun_plans=unrun)


def _classify(variant: str, phase: dict, exc: BaseException, lost: list[str]) -> Result:
    """``lost``: the names a hint of this variant slices after an op lost them: the
    refusal must say where (``fuzz_lost_names.verdict``), else it is ``unexpected``."""
    if phase["state"] == "compile":
        root = phase["exc"] or exc
        ours = find_cause(root, SpyreRulesError) or root
        cls = type(ours).__name__
        if isinstance(ours, CLEAN_REFUSALS):
            problem = verdict(cls, " ".join(str(ours).split()), lost)
            if problem is not None:
                return Result(variant, "unexpected", f"{problem}: {_error_text(ours)}", cls)
            return Result(variant, "refused", _error_text(ours), cls)
        return Result(variant, "crash", f"at compile time: {cls}: {_error_text(ours)}", cls)
    if phase["state"] == "run":
        ours = find_cause(exc, RUNTIME_ERRORS)
        if ours is not None:
            cls = type(ours).__name__
            return Result(variant, "runtime", f"{cls}: {_error_text(ours)}", cls)
        cls = type(exc).__name__
        return Result(variant, "crash", f"at run time: {cls}: {_error_text(exc)}", cls)
    cls = type(exc).__name__
    return Result(variant, "crash", f"while tracing: {cls}: {_error_text(exc)}", cls)


def standalone_source(program: Program, variant: str) -> str:
    """A script that compiles and checks this program in this variant on its own."""
    hinted = variant in ("manual", "mixed")
    settings = variant_settings(program, variant)
    declare = "\n".join(f"sr.declare_tensor_dim({n!r}, {s})" for n, s in program.dims.items())
    naming = ""
    if hinted:
        naming = "\n".join(f"sr.name_tensor_dims({v.var}, {list(v.names)!r})" for v in program.inputs)
    return f'''# fuzz program {program.key}, variant {variant}: {program.op_text()}
import os
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
import torch
import torch.nn.functional as F
import spyre_rules as sr
from spyre_rules import spyre_hint

{declare}
g = torch.Generator().manual_seed({program.seed * 100_003 + program.index})
{program.inputs_source()}
{naming}

{program.functions_source()}
with torch.no_grad():
    expected = f_plain({program.args()})
    bound = f_bound({program.args()})
    with sr.config.patch(**{settings!r}):
        actual = torch.compile({"f_hinted" if hinted else "f_plain"}, backend="spyre_rules", dynamic=False)({program.args()})

# tolerance: 4 * (R * eps + H * eps16 + N * eps32) * bound + R * tiny + H * tiny16
# (see bench/fuzz_run.py)
R, H, N = {program.rounds() + 1}, {program.half_rounds()}, {program.reduced()}
f16 = torch.finfo(torch.float16)
flat = lambda v: [v] if isinstance(v, torch.Tensor) else [t for x in v for t in flat(x)]
for i, (a, e, b) in enumerate(zip(flat(actual), flat(expected), flat(bound))):
    if not e.dtype.is_floating_point:
        print("output", i, "equal" if torch.equal(a, e) else "DIFFERENT")
        continue
    fi = torch.finfo(e.dtype)
    tol = (4 * (R * fi.eps + H * f16.eps + N * torch.finfo(torch.float32).eps) * b
           + R * fi.smallest_normal * fi.eps + H * f16.smallest_normal * f16.eps)
    diff = (a.double() - e.double()).abs()
    print("output", i, "max |err|", diff.max().item(), "elements over tolerance",
          int((diff > tol).sum()), "of", e.numel())
'''
