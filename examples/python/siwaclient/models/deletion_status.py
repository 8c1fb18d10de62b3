from enum import StrEnum


class DeletionStatus(StrEnum):
    DELETED = "deleted"
    DELETION_SCHEDULED = "deletion_scheduled"

    def __str__(self) -> str:
        return str(self.value)
