"""``torch.compile(fn, backend="spyre_rules", options={...})``: settings for one function.

torch.compile hands ``options`` to the backend every time it compiles a graph of
``fn`` (the first call, and every recompile).  The options are the settings of
``spyre_rules.config`` by name, validated like ``config.patch`` (an unknown name
is a ``ConfigError`` listing the known ones).  The graph compiles under them and
the returned callable runs every call under them too: ``fn`` is usually called
later, outside any patch, and the settings read while a program runs must be the
ones it was compiled with.  Other compiled functions keep their own settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spyre_rules import config
from spyre_rules.config import ConfigError

__all__ = ["compile_with_options"]


def compile_with_options(
    compile_graph: Callable[[Any, list[Any]], Callable],
    gm: Any,
    example_inputs: list[Any],
    options: Mapping[str, Any] | None,
) -> Callable:
    if not options:
        return compile_graph(gm, example_inputs)
    if not isinstance(options, Mapping):
        raise ConfigError(f"spyre_rules options must be a dict of settings, got {options!r}")
    patch = config.patch(dict(options))
    with patch:
        compiled = compile_graph(gm, example_inputs)

    def run(*args: Any, **kwargs: Any) -> Any:
        with patch:
            return compiled(*args, **kwargs)

    if getattr(compiled, "_boxed_call", False):
        run._boxed_call = True  # type: ignore[attr-defined]  # Dynamo passes one list
    return run
