from enum import StrEnum


class WaitReason(StrEnum):
    DAILY_QUOTA = "daily_quota"
    NO_ELIGIBLE_KEY = "no_eligible_key"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    RATE_LIMITED = "rate_limited"
    VECTOR_STORE_UNAVAILABLE = "vector_store_unavailable"

    def __str__(self) -> str:
        return str(self.value)
