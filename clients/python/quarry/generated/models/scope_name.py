from enum import StrEnum


class ScopeName(StrEnum):
    ADMIN = "admin"
    INGEST = "ingest"
    METRICS = "metrics"
    READ = "read"

    def __str__(self) -> str:
        return str(self.value)
