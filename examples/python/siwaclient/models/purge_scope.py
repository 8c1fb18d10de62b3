from enum import StrEnum


class PurgeScope(StrEnum):
    ALL = "all"
    TOKENS = "tokens"

    def __str__(self) -> str:
        return str(self.value)
