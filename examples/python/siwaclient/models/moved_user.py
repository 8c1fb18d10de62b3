from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MovedUser")


@_attrs_define
class MovedUser:
    """for 60 days after an app transfer moved the user, their old sub answers where they went

    Attributes:
        apple_sub (str):
        moved_to (str):
        moved_to_team (str):
    """

    apple_sub: str
    moved_to: str
    moved_to_team: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        apple_sub = self.apple_sub

        moved_to = self.moved_to

        moved_to_team = self.moved_to_team

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "apple_sub": apple_sub,
                "moved_to": moved_to,
                "moved_to_team": moved_to_team,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        apple_sub = d.pop("apple_sub")

        moved_to = d.pop("moved_to")

        moved_to_team = d.pop("moved_to_team")

        moved_user = cls(
            apple_sub=apple_sub,
            moved_to=moved_to,
            moved_to_team=moved_to_team,
        )

        moved_user.additional_properties = d
        return moved_user

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
