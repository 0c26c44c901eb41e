"""Device coordinates of one access: re-exported from the facts layer.

``spyre_rules.facts.coordinates.access_coordinates`` composes host coordinates
with the layout's forward map, which stays exact where applying §1.4 straight
to a flat index against the device ``stride_map`` is not (a view walking
several host dims across a padded stick).  Codegen, restickify and the
executor's stickify use the same function as the planner's facts.
"""

from __future__ import annotations

from spyre_rules.facts.coordinates import access_coordinates, forward_coordinates

__all__ = ["access_coordinates", "forward_coordinates"]
