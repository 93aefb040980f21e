from enum import StrEnum


class EmbeddingProvider(StrEnum):
    GOOGLE = "google"
    LOCAL = "local"
    OPENAI = "openai"

    def __str__(self) -> str:
        return str(self.value)
