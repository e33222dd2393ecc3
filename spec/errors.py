"""The one exception the engine raises for problems a user can act on."""
from __future__ import annotations


class ModelError(Exception):
    """A problem the user can act on; str(e) is one sentence saying what is wrong and what to do."""
