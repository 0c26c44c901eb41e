"""A kernel skips stickifying a graph input whose bytes are provably in its device
segment already this call (executor/resident.py), and writes in every other case."""

from __future__ import annotations

import pytest
import sympy
import torch

from spyre_rules.executor.runtime import rules_device, rules_make_kernel, rules_to_device
from spyre_rules.layout import generic_stick_layout
from spyre_rules.program.op_spec import OpSpec, TensorArg, TensorPlacement

c0, c1 = sympy.symbols("c0 c1")
# [4, 150] fp32: device [5, 4, 32], the last stick half padding
LAYOUT = generic_stick_layout([4, 150], [150, 1], torch.float32)
SIZE = LAYOUT.size_in_bytes
COORDS = [sympy.floor(c1 / 32), c0, sympy.Mod(c1, 32)]


def _placement(name, address, layout=LAYOUT, size=(4, 150)):
    return TensorPlacement(name=name, host_size=size, host_stride=(size[1], 1), host_dtype="float32",
                           device_size=tuple(layout.device_size), stride_map=tuple(layout.stride_map),
                           device_dtype=layout.device_dtype, address=address)


def _arg(is_input, index, address, name, layout=LAYOUT):
    return TensorArg(is_input, index, layout.device_dtype, list(layout.device_size), COORDS,
                     {"hbm": address}, name=name)


def _double(device, name, src, dst, rows=4):
    """A kernel ``out = x + x`` over ``rows`` rows: x stickified from host arg 0 at
    ``src``, out at ``dst`` unstickified into host arg 1 (when it is a whole tensor)."""
    layout = LAYOUT if rows == 4 else generic_stick_layout([rows, 150], [150, 1], torch.float32)
    spec = OpSpec(
        op="add", is_reduction=False,
        iteration_space={c0: (sympy.Integer(rows), 1), c1: (sympy.Integer(150), 1)},
        args=[_arg(True, 0, src, "x"), _arg(False, 1, dst, "out", layout)],
        op_info={"program": [{"op": "load", "arg": 0, "dtype": "float32"},
                             {"op": "load", "arg": 0, "dtype": "float32"},
                             {"op": "add", "in": [0, 1]}],
                 "store": {"arg": 1, "value": 2, "dtype": "float32"},
                 "reduction_symbols": []},
    )
    unstick = {1: _placement("out", dst)} if rows == 4 else {}
    return rules_make_kernel(name, device, [spec], stickify={0: _placement("x", src)},
                             unstickify=unstick)


def _graph():
    device = rules_device(4 * SIZE)
    return device, _double(device, "k1", 0, SIZE), _double(device, "k2", 0, 2 * SIZE)


def _counts(device):
    return device.stickify_writes, device.stickify_skips


def test_second_kernel_reading_the_input_skips_its_write():
    device, k1, k2 = _graph()
    x, o1, o2 = torch.randn(4, 150), torch.empty(4, 150), torch.empty(4, 150)
    device.begin_call()
    k1.run(x, o1)
    k2.run(x, o2)  # k1's store at [SIZE, 2*SIZE) borders x's segment, does not touch it
    device.end_call()
    assert _counts(device) == (1, 1)
    assert torch.equal(o1, x + x) and torch.equal(o2, x + x)


def _fresh():
    return torch.randn(4, 150)


def _rows_of_a_larger_tensor():
    return torch.randn(8, 150)[2:6]


def _inference_tensor():
    with torch.inference_mode():
        return torch.randn(4, 150)


def _zero_through_the_base(device, x):
    x._base.view(-1)[300:310].mul_(0)  # row 2 of the base is row 0 of x
    return x


def _host_step_over_the_segment(device, x):
    half = generic_stick_layout([2, 150], [150, 1], torch.float32)
    rules_to_device(device, _placement("z", 0, half, (2, 150)), torch.randn(2, 150))
    return x


def _store_over_the_segment(device, x):
    # a kernel writing 2 rows (a part of x's segment) from another input at 3 * SIZE
    _double(device, "clobber", 3 * SIZE, 0, rows=2).run(torch.randn(4, 150), None)
    return x


# what happens between two kernels reading graph input x -> (x as the second kernel
# gets it, stickify writes in all); every case must write x again for the second kernel
_BETWEEN = {
    "host mutation in place": (_fresh, lambda device, x: x.add_(1), 2),
    "mutation through an aliasing view": (_rows_of_a_larger_tensor, _zero_through_the_base, 2),
    "another view of the same bytes": (_fresh, lambda device, x: x.view(4, 150), 2),
    "an inference tensor": (_inference_tensor, lambda device, x: x, 2),
    "a host step output overlapping the segment": (_fresh, _host_step_over_the_segment, 3),
    "a store overlapping the segment": (_fresh, _store_over_the_segment, 3),
}


@pytest.mark.parametrize("case", sorted(_BETWEEN))
def test_the_input_is_written_again_when_its_bytes_may_have_changed(case):
    make, between, writes = _BETWEEN[case]
    device, k1, k2 = _graph()
    x, o1, o2 = make(), torch.empty(4, 150), torch.empty(4, 150)
    device.begin_call()
    k1.run(x, o1)
    x2 = between(device, x)
    k2.run(x2, o2)
    device.end_call()
    assert _counts(device) == (writes, 0)
    assert torch.equal(o2, x2 + x2)


def test_a_kernel_storing_into_its_own_input_segment_invalidates_it():
    device = rules_device(4 * SIZE)
    in_place = _double(device, "in_place", 0, 0)  # out = x + x written over x
    k2 = _double(device, "k2", 0, 2 * SIZE)
    x, o1, o2 = torch.randn(4, 150), torch.empty(4, 150), torch.empty(4, 150)
    device.begin_call()
    in_place.run(x, o1)
    k2.run(x, o2)
    device.end_call()
    assert _counts(device) == (2, 0)
    assert torch.equal(o2, x + x)


def test_nothing_carries_over_between_calls():
    device, k1, k2 = _graph()
    x, o1, o2 = torch.randn(4, 150), torch.empty(4, 150), torch.empty(4, 150)
    for _ in range(2):
        device.begin_call()
        k1.run(x, o1)
        k2.run(x, o2)
        device.end_call()
        x.data.add_(1)  # a change no version counter of x sees
    assert _counts(device) == (2, 2)
    device.begin_call()
    k1.run(x, o1)
    device.end_call()
    assert torch.equal(o1, x + x)


def test_kernels_run_outside_a_call_always_write():
    device, k1, k2 = _graph()
    x, o1, o2 = torch.randn(4, 150), torch.empty(4, 150), torch.empty(4, 150)
    k1.run(x, o1)
    k2.run(x, o2)
    assert _counts(device) == (2, 0)


def test_a_host_step_output_is_resident_for_the_kernel_reading_it():
    device, k1, k2 = _graph()
    x, o1 = torch.randn(4, 150), torch.empty(4, 150)
    device.begin_call()
    rules_to_device(device, _placement("x", 0), x)
    k1.run(x, o1)
    device.end_call()
    assert _counts(device) == (1, 1)
    assert device.host_transfers == 1
    assert torch.equal(o1, x + x)


def test_reset_memory_forgets_resident_inputs():
    device, k1, k2 = _graph()
    x, o1, o2 = torch.randn(4, 150), torch.empty(4, 150), torch.empty(4, 150)
    device.begin_call()
    k1.run(x, o1)
    device.reset()  # fresh, zeroed HBM
    k2.run(x, o2)
    device.end_call()
    assert _counts(device) == (2, 0)
    assert torch.equal(o2, x + x)
