from enum import StrEnum


class UserPurgeType0State(StrEnum):
    AVAILABLE = "available"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    DISCARDED = "discarded"
    RETRYABLE = "retryable"
    RUNNING = "running"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return str(self.value)
