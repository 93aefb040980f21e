from enum import StrEnum


class JobKind(StrEnum):
    INGEST = "ingest"
    REINGEST = "reingest"
    REPAIR = "repair"
    REPLACE = "replace"

    def __str__(self) -> str:
        return str(self.value)
