"""The IR floor: what every stage that reads or edits Inductor IR shares.

* ``graph_state`` -- ``RulesGraphState``, the per-graph bookkeeping hung off a
  ``GraphLowering`` (layouts, plan records, kernels, memory map);
* ``ir_edit``     -- careful edits of frozen IR objects, ``op_description``;
* ``errors``      -- ``UnsupportedGraph`` and the error-chain helpers;
* ``dim_hint``    -- ``DimHint``, one loop level stamped on an op (``op.dim_hints``).

Nothing here imports a higher layer (``tests/test_layers.py``): hints, passes,
the scheduler, codegen and the backend all build on it.  Import the modules
directly; this package imports nothing so that ``spyre_rules.ir.errors`` stays
torch-free.
"""
