from enum import StrEnum


class Outcome(StrEnum):
    CREATED = "created"
    REPLACED = "replaced"
    UNCHANGED = "unchanged"

    def __str__(self) -> str:
        return str(self.value)
