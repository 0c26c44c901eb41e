"""Keep a first run free of warnings that say nothing to the user.

The backend turns Inductor's caches off (a cache hit would skip its seam:
docs in ``spyre_rules/backend/context.py``); torch then warns once per process
that Dynamo's profile-guided cache is off too.  That is our own setting, not
a problem in the user's program, so the commands that compile hide exactly
that warning and nothing else.
"""

from __future__ import annotations

import warnings


def hide_cache_off_warning() -> None:
    warnings.filterwarnings("ignore", category=UserWarning,
                            message=r"dynamo_pgo force disabled by torch\.compiler\.config\.force_disable_caches")
