from enum import StrEnum


class EventsFeedRefusalError(StrEnum):
    BAD_CURSOR = "bad_cursor"
    BAD_LIMIT = "bad_limit"
    UNKNOWN_CURSOR = "unknown_cursor"

    def __str__(self) -> str:
        return str(self.value)
