from enum import StrEnum


class JobState(StrEnum):
    AVAILABLE = "available"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    DISCARDED = "discarded"
    RETRYABLE = "retryable"
    RUNNING = "running"

    def __str__(self) -> str:
        return str(self.value)
