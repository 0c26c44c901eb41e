"""Where the bundled grammar and rules live.

Users edit ``grammar/`` and ``rules/`` at the top of the repository.  A wheel
ships them inside the package as ``spyre_rules/bundled_grammar`` and
``spyre_rules/bundled_rules`` (pyproject's package-dir mapping); a checkout or
editable install reads them in place.  No torch import here.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _bundled(installed_name: str, checkout_name: str) -> Path:
    for candidate in (_PACKAGE_DIR / installed_name, _PACKAGE_DIR.parent / checkout_name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"bundled {checkout_name}/ not found next to {_PACKAGE_DIR} "
        f"(looked for {installed_name}/ inside the package and {checkout_name}/ beside it)"
    )


def rules_dir() -> Path:
    """The directory holding the default policy (``rules/*.rules``)."""
    return _bundled("bundled_rules", "rules")


def grammar_file() -> Path:
    """The Lark grammar of the ``.rules`` language."""
    return _bundled("bundled_grammar", "grammar") / "spyre_rules.lark"
