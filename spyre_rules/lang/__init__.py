"""The ``.rules`` language: grammar loading and parsing (``parser``), the typed
AST (``ast``), types (``types``), the fact vocabulary of the prelude
(``prelude``), what each section kind may hold (``sections``), constant
evaluation (``consts``), message templates (``templates``), the type checker
(``checker``), the shadowed-rule analysis (``shadowing``), diagnostics and
their rendering (``diagnostics``), and checking a set of files (``driver``).

Nothing here imports torch; this package root imports nothing at all.
"""
