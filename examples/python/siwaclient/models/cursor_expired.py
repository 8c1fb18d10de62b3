from __future__ import annotations

from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    Self,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CursorExpired")


@_attrs_define
class CursorExpired:
    """
    Attributes:
        error (Literal['cursor_expired']):
        detail (str): one of siwa's own sentences, never the request's bytes
    """

    error: Literal["cursor_expired"]
    detail: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        error = self.error

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
        error = cast(Literal["cursor_expired"], d.pop("error"))
        if error != "cursor_expired":
            raise ValueError(f"error must match const 'cursor_expired', got '{error}'")

        detail = d.pop("detail")

        cursor_expired = cls(
            error=error,
            detail=detail,
        )

        cursor_expired.additional_properties = d
        return cursor_expired

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
