"""``bundle.mlir`` for kernels with counted loops (docs/layout_model.md §5.7).

Compact form: one ``scf.for`` per LoopSpec (bounds ``%loop_bound_N``, numbered
depth first; a LoopSpec starting at ``first`` > 0, a peeled last tile, runs
``%loop_first_N`` to ``%loop_bound_N`` = first + count, so its loop variable is the
real iteration the affine maps multiply), one ``sdscbundle.sdsc_execute`` per OpSpec (``sdsc_N.json``,
depth first, so the file count does not grow with the trip counts).  Operands of
an execute are the op's HBM tensors in arg order:

* a *moving* tensor (non-zero stride at some enclosing level) gets
  ``%addr_M = affine.apply #map_K(%i_0, ...)[%sym_J]`` where ``%sym_J`` is its
  iteration-0 address and ``#map_K = affine_map<(d0, ...)[s0] -> (s0 + S0*d0 + ...)>``
  with byte strides from ``codegen.loops.arg_level_strides`` -- the offsets the
  executor applies (maps are deduplicated by stride tuple, outermost level first);
* a fixed tensor (``per_tile_fixed``, loop-invariant, or outside every loop)
  is passed as its ``%sym_J`` constant directly;
* LX tensors are not operands (their scratchpad offset is part of the SDSC and
  never moves); the execute lists them as ``lx_offsets``.

``form`` is ``codegen/bundle_op.py``'s: ``custom`` or ``generic`` (every
operand typed ``index``).  Symbolic trip counts raise NotImplementedError (no runtime shapes in the bundle).
"""

from __future__ import annotations

from typing import Any

from spyre_rules.codegen.bundle_op import sdsc_execute
from spyre_rules.codegen.loops import arg_level_strides
from spyre_rules.program.op_spec import LoopSpec, OpSpec

__all__ = ["generate_loop_bundle"]


class _Emitter:
    def __init__(self, form: str) -> None:
        self.form = form
        self.maps: dict[tuple[int, ...], int] = {}
        self.bounds: list[str] = []
        self.symbols: list[int] = []
        self.body: list[str] = []
        self.files = 0
        self.addrs = 0
        self.loops = 0

    def _map(self, strides: tuple[int, ...]) -> int:
        return self.maps.setdefault(strides, len(self.maps))

    def _symbol(self, address: int) -> str:
        self.symbols.append(int(address))
        return f"%sym_{len(self.symbols)}"

    def walk(self, items: list[Any], depth: int, pad: str) -> None:
        for item in items:
            if isinstance(item, LoopSpec):
                if not getattr(item.count, "is_Integer", isinstance(item.count, int)):
                    raise NotImplementedError(
                        f"bundle.mlir needs a concrete loop count, got {item.count}"
                    )
                n = self.loops
                self.loops += 1
                first = int(item.first)
                lower = "%c0"
                if first:
                    lower = f"%loop_first_{n}"
                    self.bounds.append(f"{lower} = arith.constant {first} : index")
                self.bounds.append(
                    f"%loop_bound_{n} = arith.constant {first + int(item.count)} : index")
                self.body.append(f"{pad}scf.for %i_{n} = {lower} to %loop_bound_{n} step %c1 {{")
                self.loop_vars.append(f"%i_{n}")
                self.walk(item.body, depth + 1, pad + "  ")
                self.loop_vars.pop()
                self.body.append(f"{pad}}}")
            else:
                self.execute(item, depth, pad)

    def execute(self, spec: OpSpec, depth: int, pad: str) -> None:
        operands, lx = [], []
        for arg in spec.args:
            if "lx" in arg.allocation:
                lx.append(int(arg.allocation["lx"]))
                continue
            sym = self._symbol(arg.allocation["hbm"])
            strides = tuple(arg_level_strides(spec, arg, depth))
            if any(strides):
                k = self._map(strides)
                addr = f"%addr_{self.addrs}"
                self.addrs += 1
                self.body.append(
                    f"{pad}{addr} = affine.apply #map_{k}({', '.join(self.loop_vars)})[{sym}]"
                )
                operands.append(addr)
            else:
                operands.append(sym)
        attrs = [("sdsc_filename", f'"sdsc_{self.files}.json"')]
        if lx:
            attrs.append(("lx_offsets", f"[{', '.join(map(str, lx))}]"))
        self.body.append(f"{pad}{sdsc_execute(operands, attrs, self.form)}  // {spec.op}")
        self.files += 1

    loop_vars: list[str]


def _affine_map(strides: tuple[int, ...], k: int) -> str:
    dims = ", ".join(f"d{i}" for i in range(len(strides)))
    terms = "".join(f" + {s}*d{i}" for i, s in enumerate(strides) if s)
    return f"#map_{k} = affine_map<({dims})[s0] -> (s0{terms})>"


def generate_loop_bundle(items: list[Any], form: str = "custom") -> str:
    em = _Emitter(form)
    em.loop_vars = []
    em.walk(items, 0, "    ")
    lines = [_affine_map(strides, k) for strides, k in em.maps.items()]
    lines += ["module {", "  func.func @sdsc_bundle() {",
              "    %c0 = arith.constant 0 : index", "    %c1 = arith.constant 1 : index"]
    lines += [f"    {b}" for b in em.bounds]
    lines += [f"    %sym_{i + 1} = arith.constant {a} : index" for i, a in enumerate(em.symbols)]
    lines += em.body
    lines += ["    return", "  }", "}", ""]
    return "\n".join(lines)
