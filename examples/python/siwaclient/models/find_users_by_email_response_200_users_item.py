from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FindUsersByEmailResponse200UsersItem")


@_attrs_define
class FindUsersByEmailResponse200UsersItem:
    """
    Attributes:
        apple_sub (str):
        apple_team (str):
        user_id (int):
    """

    apple_sub: str
    apple_team: str
    user_id: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        apple_sub = self.apple_sub

        apple_team = self.apple_team

        user_id = self.user_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "apple_sub": apple_sub,
                "apple_team": apple_team,
                "user_id": user_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        apple_sub = d.pop("apple_sub")

        apple_team = d.pop("apple_team")

        user_id = d.pop("user_id")

        find_users_by_email_response_200_users_item = cls(
            apple_sub=apple_sub,
            apple_team=apple_team,
            user_id=user_id,
        )

        find_users_by_email_response_200_users_item.additional_properties = d
        return find_users_by_email_response_200_users_item

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
