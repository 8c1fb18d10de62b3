from enum import StrEnum


class JobKind(StrEnum):
    APP_EVENT = "app_event"
    PURGE_USER = "purge_user"
    TRANSFER_COMPLETE = "transfer_complete"
    TRANSFER_PREPARE = "transfer_prepare"

    def __str__(self) -> str:
        return str(self.value)
