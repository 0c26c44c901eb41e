"""Resource limits of the checker (docs/rules_language.md, "Limits").

Each limit keeps checking one policy fast and bounded, whatever the input;
crossing one is a diagnostic (E040 nesting, E042 integer range, E043 size),
never a crash or a hang.  No real policy comes near them: the bundled rules
are a few thousand tokens, nest a few levels deep, and use integers far
below 2**63.
"""

MAX_FILE_BYTES = 2 * 1024 * 1024   # a larger file is not read further (E043)
MAX_TOKENS = 50_000                # tokens of one file; beyond them it is not parsed (E043)
MAX_ITEM_TOKENS = 10_000           # tokens between two `;` (one item and its expressions) (E043)
MAX_ITEMS = 5_000                  # items of one file, section items included (E043)
MAX_PARSE_DEPTH = 1_000            # parser stack (open brackets, operators); beyond it the file stops (E040)
# The checker's expression nesting limit (E040) is ``scope.MAX_DEPTH``; the integer
# range (E042) is ``consts.MAX_INT_BITS``.
