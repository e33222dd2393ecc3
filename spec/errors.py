"""The exceptions the engine raises on purpose: a problem a user can act on, and work stopped
because nobody waits for it any more."""
from __future__ import annotations


class ModelError(Exception):
    """A problem the user can act on; str(e) is one sentence saying what is wrong and what to do."""


class Cancelled(Exception):
    """Work (a download, a conversion) stopped because nobody waits for its result any more."""
