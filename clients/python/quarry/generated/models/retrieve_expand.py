from enum import StrEnum


class RetrieveExpand(StrEnum):
    NEIGHBORS = "neighbors"
    NONE = "none"
    PARENT = "parent"

    def __str__(self) -> str:
        return str(self.value)
