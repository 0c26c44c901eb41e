"""Code generation of the Spyre program: OpSpec/TensorArg/LoopSpec (the program
model, ``spyre_rules.program``) from scheduler nodes, their wrapper source,
sdsc_N.json / bundle.mlir and the dump directory."""
