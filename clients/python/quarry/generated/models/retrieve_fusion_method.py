from enum import StrEnum


class RetrieveFusionMethod(StrEnum):
    AUTO = "auto"
    DBSF = "dbsf"
    RRF = "rrf"

    def __str__(self) -> str:
        return str(self.value)
