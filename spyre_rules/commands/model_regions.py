"""The decoder layers of a model marked as nested compile regions, for one compile.

``spyre-rules plan`` compiles a whole model whose decoder layers are one class
repeated in a ``ModuleList``.  Marked with ``torch.compiler.nested_compile_region``
(PyTorch's regional compilation), Dynamo traces that class's ``forward`` once and
calls it once per layer, and the backend compiles it once and runs that program
for every layer (backend/regions.py): planning a model costs its first layer, not
its layer count.  The mark is put on the class for the compile only, and taken
off after, so an eager run or another compile of the class is unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["layer_classes", "marked_layers"]


def layer_classes(net: Any) -> list[type]:
    """The classes of the repeated blocks of ``net``: the elements of each
    outermost ``ModuleList`` of two or more elements, all one class with parameters
    (a list inside such an element, e.g. a layer's experts, is part of the layer).
    A single layer is not marked: it has nothing to share, and compiles as before."""
    import torch

    found: list[type] = []
    inside: set[int] = set()
    for module in net.modules():
        if id(module) in inside or not isinstance(module, torch.nn.ModuleList) or len(module) < 2:
            continue
        classes = {type(child) for child in module}
        if len(classes) != 1 or not any(True for _ in module[0].parameters()):
            continue
        cls = classes.pop()
        if cls not in found:
            found.append(cls)
        for child in module:
            inside.update(id(m) for m in child.modules())
    return found


@contextlib.contextmanager
def marked_layers(net: Any) -> Iterator[list[type]]:
    """``forward`` of each of ``net``'s layer classes marked as a nested compile
    region while the block runs; yields the classes."""
    import torch

    classes = layer_classes(net)
    saved = [(cls, cls.__dict__.get("forward")) for cls in classes]
    try:
        for cls in classes:
            cls.forward = torch.compiler.nested_compile_region(cls.forward)
        yield classes
    finally:
        for cls, forward in saved:
            if forward is None:
                del cls.forward  # it was inherited
            else:
                cls.forward = forward
