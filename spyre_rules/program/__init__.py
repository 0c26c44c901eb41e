"""The program model: what codegen writes and the executor runs.

* ``op_spec``    -- ``OpSpec`` / ``LoopSpec`` / ``TensorArg`` / ``TensorPlacement``
  (the kernel program, docs/layout_model.md §5.5);
* ``memory_map`` -- ``MemoryMap``, the simulated HBM byte map of one graph;
* ``pointwise``  -- the pointwise op vocabulary of ``op_info`` programs and its
  meaning (torch implementations): codegen accepts exactly these names, the
  executor runs them;
* ``index_eval`` -- the meaning of index expressions (sympy over ``c0, c1, ...``)
  on integer grids: codegen records an ``index_expr`` only when it compiles here,
  the executor evaluates it here.

Passes, codegen, the scheduler and the executor import these records without
importing codegen's builders.  Import the modules directly (this package imports
nothing).
"""
