from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.notification_reason_code import NotificationReasonCode

T = TypeVar("T", bound="NotificationRefusal")


@_attrs_define
class NotificationRefusal:
    """
    Attributes:
        error (NotificationReasonCode): why POST /apple/notifications refused a delivery with 400 (docs/http-api.md,
            "Reason codes")
        detail (str): one of siwa's own sentences, never the request's bytes
    """

    error: NotificationReasonCode
    detail: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        error = self.error.value

        detail = self.detail

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "error": error,
                "detail": detail,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        error = NotificationReasonCode(d.pop("error"))

        detail = d.pop("detail")

        notification_refusal = cls(
            error=error,
            detail=detail,
        )

        notification_refusal.additional_properties = d
        return notification_refusal

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
