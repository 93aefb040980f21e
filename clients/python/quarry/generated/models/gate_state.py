from enum import StrEnum


class GateState(StrEnum):
    DISCARDED = "discarded"
    EVALUATING = "evaluating"
    HELD = "held"
    PASSED = "passed"
    PROMOTED = "promoted"
    WAITING = "waiting"

    def __str__(self) -> str:
        return str(self.value)
