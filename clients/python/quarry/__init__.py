"""Python client for quarry.

``Quarry`` and its ``World`` handles are the hand-written layer (add text and files, keep a
folder in sync, follow jobs, retrieve with citations); ``quarry.generated`` is the complete
client generated from quarry's OpenAPI document, for every other operation.
``quarry.langchain`` and ``quarry.llamaindex`` (optional extras) adapt a world as a retriever.
"""

from ._client import Passage, Progress, Quarry, SyncReport, World, passages_of
from ._errors import QuarryError, QuarryJobError

__all__ = [
    "Passage",
    "Progress",
    "Quarry",
    "QuarryError",
    "QuarryJobError",
    "SyncReport",
    "World",
    "passages_of",
]
