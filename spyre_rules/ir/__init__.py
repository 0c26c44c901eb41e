"""The IR floor: what every stage that reads or edits Inductor IR shares.

* ``graph_state`` -- ``RulesGraphState``, the per-graph bookkeeping hung off a
  ``GraphLowering`` (layouts, plan records, kernels, memory map);
* ``ir_edit``     -- careful edits of frozen IR objects, ``op_description``;
* ``errors``      -- ``UnsupportedGraph`` and the error-chain helpers;
* ``dim_hint``    -- ``DimHint``, one loop level stamped on an op (``op.dim_hints``), and
  ``AutomaticDimHint``, one the rule engine's grouping decided;
* ``loop_stamp``  -- ``LoopStamp``, the counted loops coarse tiling stamped on an op;
* ``op_identity`` -- ``op_name`` / ``op_kind`` / ``ir_class``: how every layer names
  an op and says what kind it is.

Nothing here imports a higher layer (``tests/test_layers.py``): facts, the engine,
hints, passes, the scheduler, codegen and the backend all build on it.  Import the
modules directly; this package imports nothing so that ``errors``, ``loop_stamp``
and ``op_identity`` stay torch-free (the rules-language tools never import torch).
"""
