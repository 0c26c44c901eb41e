"""``specialize_graph``: a Dynamo graph with symbolic sizes bound to one call's
sizes (no SymInt input, no size arithmetic left) and ``same_graph``, which
decides whether a frame's static program may serve a specialisation."""

from __future__ import annotations

import torch

from spyre_rules.backend.specialize_graph import same_graph, specialize, value_inputs


def _graphs(fn, *calls, dynamic=None):
    """The graph and example inputs Dynamo hands a backend, per compile."""
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
    for args in calls:
        compiled(*args)
    return seen


def _viewed(x):
    n = x.shape[1]
    return (x.view(x.shape[0], n // 4, 4) * n).sum(-1) + torch.arange(n // 4)


def test_specialised_graph_has_no_symbol_and_equals_the_static_trace():
    (static, _), (dynamic, example) = _graphs(
        _viewed, (torch.randn(2, 16),), (torch.randn(2, 32),))
    assert isinstance(example[0], torch.SymInt)  # the symbolic length is graph input 0
    x = torch.randn(2, 16)
    done = specialize(dynamic, [16, x])
    assert done.kept == [1]
    assert [n.op for n in done.gm.graph.nodes].count("placeholder") == 1
    assert not any(isinstance(v, torch.SymInt) for n in done.gm.graph.nodes
                   for v in [n.meta.get("example_value")])
    torch.testing.assert_close(done.gm(x)[0], _viewed(x))
    # the folded graph is the graph Dynamo traced statically for 16, not for 32
    assert same_graph(done.gm, static)
    assert not same_graph(specialize(dynamic, [32, torch.randn(2, 32)]).gm, static)


def test_a_different_constant_is_a_different_graph():
    (a, _), = _graphs(lambda x: x * 2.0, (torch.randn(4),))
    (b, _), = _graphs(lambda x: x * 3.0, (torch.randn(4),))
    assert same_graph(a, a) and not same_graph(a, b)


def test_a_float_input_read_by_value_is_folded_and_dropped():
    def scaled(x, s):
        return x * s

    graphs = _graphs(scaled, (torch.randn(8), 2.5), dynamic=True)
    (gm, example), = graphs
    # Dynamo passes the float as a 0-d float64 tensor input and reads it with item()
    assert value_inputs(gm) == [2] and isinstance(example[0], torch.SymInt)
    x = torch.randn(8)
    args = [8, x, torch.tensor(2.5, dtype=torch.float64)]
    done = specialize(gm, args)
    assert done.kept == [1]  # the float is a constant of the program, not an input
    torch.testing.assert_close(done.gm(*[args[i] for i in done.kept])[0], x * 2.5)
