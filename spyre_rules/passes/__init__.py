"""IR passes over ``graph.operations`` that other stages build on.

* ``coarse_tile`` -- stamp counted loops (a ``LoopStamp``, ``ir/loop_stamp.py``)
  and shrink ops and layouts to one tile.

Note: ``spyre_rules.passes.coarse_tile`` is the *function* once this package is
imported (it shadows the submodule attribute); import names from the module with
``from spyre_rules.passes.coarse_tile import CoarseTileError``.
"""

from __future__ import annotations

from spyre_rules.passes.coarse_tile import CoarseTileError, coarse_tile, normalize_group

__all__ = ["CoarseTileError", "coarse_tile", "normalize_group"]
