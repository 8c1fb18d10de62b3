from enum import StrEnum


class HistoryEntrySource(StrEnum):
    AUDIT = "audit"
    JOB = "job"
    NOTIFICATION = "notification"

    def __str__(self) -> str:
        return str(self.value)
