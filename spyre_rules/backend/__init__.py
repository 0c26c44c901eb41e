"""The ``spyre_rules`` torch.compile backend over real Inductor IR.

The composition root: the only package that names the passes of the lower
layers and their order (docs/architecture.md "Layers").  Modules (one job each):

* ``pass_lists``     -- the ordered pre-scheduling and post-fusion pass lists;
* ``compile``        -- the backend function and the eager/error fallback;
* ``context``        -- installs and restores every Inductor hook;
* ``matmul``         -- mm/bmm/addmm/baddbmm -> ``batchmatmul`` Reductions;
* ``pre_scheduling`` -- the seam before the Scheduler (support check, layouts,
  restickify, plan records, the pre-scheduling pass list, memory map, capture);
* ``support`` / ``layouts`` / ``restickify`` -- the passes themselves;
* ``post_fusion``    -- the post-fusion seam (a stateless CustomSchedulerPass);
* ``scheduling`` / ``wrapper`` -- kernel and wrapper code generation;
* ``capture``        -- ``capture_operations``;
* ``meta_device``    -- compiling without running: meta-device graphs as CPU
  graphs, outputs made from recorded shapes;
* ``options``        -- ``torch.compile(options=...)``: settings for one compiled function;
* ``specialize`` / ``specialize_graph`` -- a graph with symbolic sizes as one
  static program per concrete shape (compiled at the call, cached by sizes).
"""

from __future__ import annotations

from typing import Any

__all__ = ["spyre_rules_backend", "capture_operations"]


def spyre_rules_backend(gm: Any, example_inputs: list[Any], options: Any = None) -> Any:
    """The registered backend; ``options`` come from ``torch.compile(options=...)``."""
    from spyre_rules.backend.compile import spyre_rules_backend as backend
    from spyre_rules.backend.options import compile_with_options

    return compile_with_options(backend, gm, example_inputs, options)


def capture_operations(fn: Any, *example_inputs: Any) -> Any:
    from spyre_rules.backend.capture import capture_operations as capture

    return capture(fn, *example_inputs)
