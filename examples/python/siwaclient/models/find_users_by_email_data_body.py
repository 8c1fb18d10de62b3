from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="FindUsersByEmailDataBody")


@_attrs_define
class FindUsersByEmailDataBody:
    """
    Attributes:
        email (str | Unset):
        csrf (str | Unset):
        days (int | Unset):
    """

    email: str | Unset = UNSET
    csrf: str | Unset = UNSET
    days: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        email = self.email

        csrf = self.csrf

        days = self.days

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if email is not UNSET:
            field_dict["email"] = email
        if csrf is not UNSET:
            field_dict["csrf"] = csrf
        if days is not UNSET:
            field_dict["days"] = days

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        email = d.pop("email", UNSET)

        csrf = d.pop("csrf", UNSET)

        days = d.pop("days", UNSET)

        find_users_by_email_data_body = cls(
            email=email,
            csrf=csrf,
            days=days,
        )

        find_users_by_email_data_body.additional_properties = d
        return find_users_by_email_data_body

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
