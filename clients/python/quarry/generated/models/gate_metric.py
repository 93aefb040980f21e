from enum import StrEnum


class GateMetric(StrEnum):
    ANSWER_SHARE = "answer_share"
    FULLY = "fully"
    HIT_AT_1 = "hit_at_1"
    HIT_AT_5 = "hit_at_5"
    MRR_AT_10 = "mrr_at_10"

    def __str__(self) -> str:
        return str(self.value)
