"""Code generation of the Spyre program: OpSpec/TensorArg/LoopSpec, their wrapper
source, the memory map, sdsc_N.json / bundle.mlir and the dump directory."""
