from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="AppleEventData")


@_attrs_define
class AppleEventData:
    """the data of every Apple event (`apple.*`)

    Attributes:
        sub (str):
        apple_type (str): Apple's own event type
        older_than_sign_in (bool): the user signed in again after it; siwa ignored it
        team (str | Unset):
        client_id (str | Unset):
        jti (str | Unset):
        event_time (int | Unset): Apple's event_time, Unix milliseconds
        is_private_email (bool | Unset):
        email (str | Unset): Apple's email events only, with SIWA_APP_WEBHOOK_INCLUDE_EMAIL=true
        purge (bool | Unset):
        purge_after (datetime.datetime | Unset): when a consent revocation's purge runs (under `purge` with a delay)
    """

    sub: str
    apple_type: str
    older_than_sign_in: bool
    team: str | Unset = UNSET
    client_id: str | Unset = UNSET
    jti: str | Unset = UNSET
    event_time: int | Unset = UNSET
    is_private_email: bool | Unset = UNSET
    email: str | Unset = UNSET
    purge: bool | Unset = UNSET
    purge_after: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sub = self.sub

        apple_type = self.apple_type

        older_than_sign_in = self.older_than_sign_in

        team = self.team

        client_id = self.client_id

        jti = self.jti

        event_time = self.event_time

        is_private_email = self.is_private_email

        email = self.email

        purge = self.purge

        purge_after: str | Unset = UNSET
        if not isinstance(self.purge_after, Unset):
            purge_after = self.purge_after.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sub": sub,
                "apple_type": apple_type,
                "older_than_sign_in": older_than_sign_in,
            }
        )
        if team is not UNSET:
            field_dict["team"] = team
        if client_id is not UNSET:
            field_dict["client_id"] = client_id
        if jti is not UNSET:
            field_dict["jti"] = jti
        if event_time is not UNSET:
            field_dict["event_time"] = event_time
        if is_private_email is not UNSET:
            field_dict["is_private_email"] = is_private_email
        if email is not UNSET:
            field_dict["email"] = email
        if purge is not UNSET:
            field_dict["purge"] = purge
        if purge_after is not UNSET:
            field_dict["purge_after"] = purge_after

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        sub = d.pop("sub")

        apple_type = d.pop("apple_type")

        older_than_sign_in = d.pop("older_than_sign_in")

        team = d.pop("team", UNSET)

        client_id = d.pop("client_id", UNSET)

        jti = d.pop("jti", UNSET)

        event_time = d.pop("event_time", UNSET)

        is_private_email = d.pop("is_private_email", UNSET)

        email = d.pop("email", UNSET)

        purge = d.pop("purge", UNSET)

        _purge_after = d.pop("purge_after", UNSET)
        purge_after: datetime.datetime | Unset
        if isinstance(_purge_after, Unset):
            purge_after = UNSET
        else:
            purge_after = datetime.datetime.fromisoformat(_purge_after)

        apple_event_data = cls(
            sub=sub,
            apple_type=apple_type,
            older_than_sign_in=older_than_sign_in,
            team=team,
            client_id=client_id,
            jti=jti,
            event_time=event_time,
            is_private_email=is_private_email,
            email=email,
            purge=purge,
            purge_after=purge_after,
        )

        apple_event_data.additional_properties = d
        return apple_event_data

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
