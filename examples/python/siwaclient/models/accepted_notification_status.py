from enum import StrEnum


class AcceptedNotificationStatus(StrEnum):
    DUPLICATE = "duplicate"
    RECORDED = "recorded"

    def __str__(self) -> str:
        return str(self.value)
