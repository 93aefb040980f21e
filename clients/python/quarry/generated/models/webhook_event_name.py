from enum import StrEnum


class WebhookEventName(StrEnum):
    JOB_CANCELLED = "job.cancelled"
    JOB_COMPLETED = "job.completed"
    JOB_FAILED = "job.failed"
    JOB_HELD = "job.held"
    JOB_WAITING = "job.waiting"

    def __str__(self) -> str:
        return str(self.value)
