from enum import StrEnum


class RetrieveMode(StrEnum):
    AUTO = "auto"
    DENSE = "dense"
    FULL = "full"
    HYBRID = "hybrid"

    def __str__(self) -> str:
        return str(self.value)
