from enum import StrEnum


class KeyProvider(StrEnum):
    GOOGLE = "google"
    OPENAI = "openai"
    RERANK = "rerank"

    def __str__(self) -> str:
        return str(self.value)
