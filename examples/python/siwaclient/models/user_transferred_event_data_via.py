from enum import StrEnum


class UserTransferredEventDataVia(StrEnum):
    SIGN_IN = "sign_in"
    USERMIGRATIONINFO = "usermigrationinfo"

    def __str__(self) -> str:
        return str(self.value)
