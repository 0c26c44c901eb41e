"""A joint plan's product stays a per-tile buffer only with its reader in its loop (issue 40).

``check_joint`` is the guard that makes the relaxed measurements of a joint plan safe:
the product skips its full-buffer write and its reader's read of it is measured as the
product's per-tile buffer only when, as the loop closes, the reader is in it with the
same levels.  Otherwise the product's own refusal stands, with the reason.
"""

from __future__ import annotations

import pytest

from spyre_rules.engine.joint_plans import JointPlan, check_joint
from spyre_rules.engine.values import Level
from spyre_rules.errors import Unsupported


class _Op:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


PRODUCT, ADD, OTHER = _Op("buf0"), _Op("buf1"), _Op("buf5")
LEVELS = [Level(0, 3, False), Level(1, 6, False)]
REFUSED = Unsupported("Cannot auto-tile buf0 (aten ops: addmm.default): writing tile ...")
JOINT = {"buf0": JointPlan("buf1", REFUSED)}


def test_the_reader_in_the_loop_with_the_same_levels_keeps_the_joint_plan():
    check_joint([(PRODUCT, LEVELS), (ADD, list(LEVELS))], JOINT)
    check_joint([(OTHER, LEVELS)], JOINT)  # a loop without the product has nothing to check


@pytest.mark.parametrize("members,why", [
    ([(PRODUCT, LEVELS), (OTHER, LEVELS)], "but buf1 is not in its loop"),
    ([(PRODUCT, LEVELS), (ADD, [Level(0, 3, False), Level(1, 3, False)])], "but buf1 runs levels"),
])
def test_a_reader_outside_the_loop_or_on_other_levels_refuses_the_product(members, why):
    with pytest.raises(Unsupported) as refused:
        check_joint(members, JOINT)
    text = str(refused.value)
    assert text.startswith("Cannot auto-tile buf0 (aten ops: addmm.default): writing tile ...")
    assert "as a per-tile buffer of a loop shared with its one reader buf1 it would fit" in text
    assert why in text
