from enum import StrEnum


class JobChangeForbiddenErrorError(StrEnum):
    BAD_CSRF_TOKEN = "bad_csrf_token"
    CROSS_SITE = "cross_site"
    FORBIDDEN = "forbidden"

    def __str__(self) -> str:
        return str(self.value)
