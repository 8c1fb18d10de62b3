from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.user_status import UserStatus

if TYPE_CHECKING:
    from ..models.user_purge_type_0 import UserPurgeType0
    from ..models.user_refresh_token import UserRefreshToken


T = TypeVar("T", bound="User")


@_attrs_define
class User:
    """
    Attributes:
        user_id (int):
        apple_sub (str):
        team (str):
        client_id (None | str): the client of the user's latest sign-in or Apple event; null for a user siwa knew before
            it kept one
        status (UserStatus):
        email (None | str):
        email_verified (bool | None):
        is_private_email (bool | None):
        email_forwarding_enabled (bool):
        given_name (None | str):
        family_name (None | str):
        real_user_status (int | None): 0 unsupported, 1 unknown, 2 likely real; a value Apple may add outside them is
            answered 1; null when Apple never said
        org_id (None | str):
        created_at (datetime.datetime):
        last_sign_in_at (datetime.datetime | None):
        refresh_token (UserRefreshToken):
        purge (None | UserPurgeType0): the user's latest purge, null when there is none
    """

    user_id: int
    apple_sub: str
    team: str
    client_id: None | str
    status: UserStatus
    email: None | str
    email_verified: bool | None
    is_private_email: bool | None
    email_forwarding_enabled: bool
    given_name: None | str
    family_name: None | str
    real_user_status: int | None
    org_id: None | str
    created_at: datetime.datetime
    last_sign_in_at: datetime.datetime | None
    refresh_token: UserRefreshToken
    purge: None | UserPurgeType0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.user_purge_type_0 import UserPurgeType0

        user_id = self.user_id

        apple_sub = self.apple_sub

        team = self.team

        client_id: None | str
        client_id = self.client_id

        status = self.status.value

        email: None | str
        email = self.email

        email_verified: bool | None
        email_verified = self.email_verified

        is_private_email: bool | None
        is_private_email = self.is_private_email

        email_forwarding_enabled = self.email_forwarding_enabled

        given_name: None | str
        given_name = self.given_name

        family_name: None | str
        family_name = self.family_name

        real_user_status: int | None
        real_user_status = self.real_user_status

        org_id: None | str
        org_id = self.org_id

        created_at = self.created_at.isoformat()

        last_sign_in_at: None | str
        if isinstance(self.last_sign_in_at, datetime.datetime):
            last_sign_in_at = self.last_sign_in_at.isoformat()
        else:
            last_sign_in_at = self.last_sign_in_at

        refresh_token = self.refresh_token.to_dict()

        purge: dict[str, Any] | None
        if isinstance(self.purge, UserPurgeType0):
            purge = self.purge.to_dict()
        else:
            purge = self.purge

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "user_id": user_id,
                "apple_sub": apple_sub,
                "team": team,
                "client_id": client_id,
                "status": status,
                "email": email,
                "email_verified": email_verified,
                "is_private_email": is_private_email,
                "email_forwarding_enabled": email_forwarding_enabled,
                "given_name": given_name,
                "family_name": family_name,
                "real_user_status": real_user_status,
                "org_id": org_id,
                "created_at": created_at,
                "last_sign_in_at": last_sign_in_at,
                "refresh_token": refresh_token,
                "purge": purge,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.user_purge_type_0 import UserPurgeType0
        from ..models.user_refresh_token import UserRefreshToken

        d = dict(src_dict)
        user_id = d.pop("user_id")

        apple_sub = d.pop("apple_sub")

        team = d.pop("team")

        def _parse_client_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        client_id = _parse_client_id(d.pop("client_id"))

        status = UserStatus(d.pop("status"))

        def _parse_email(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        email = _parse_email(d.pop("email"))

        def _parse_email_verified(data: object) -> bool | None:
            if data is None:
                return data
            return cast(bool | None, data)

        email_verified = _parse_email_verified(d.pop("email_verified"))

        def _parse_is_private_email(data: object) -> bool | None:
            if data is None:
                return data
            return cast(bool | None, data)

        is_private_email = _parse_is_private_email(d.pop("is_private_email"))

        email_forwarding_enabled = d.pop("email_forwarding_enabled")

        def _parse_given_name(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        given_name = _parse_given_name(d.pop("given_name"))

        def _parse_family_name(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        family_name = _parse_family_name(d.pop("family_name"))

        def _parse_real_user_status(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        real_user_status = _parse_real_user_status(d.pop("real_user_status"))

        def _parse_org_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        org_id = _parse_org_id(d.pop("org_id"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_last_sign_in_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_sign_in_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_sign_in_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        last_sign_in_at = _parse_last_sign_in_at(d.pop("last_sign_in_at"))

        refresh_token = UserRefreshToken.from_dict(d.pop("refresh_token"))

        def _parse_purge(data: object) -> None | UserPurgeType0:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                purge_type_0 = UserPurgeType0.from_dict(data)

                return purge_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | UserPurgeType0, data)

        purge = _parse_purge(d.pop("purge"))

        user = cls(
            user_id=user_id,
            apple_sub=apple_sub,
            team=team,
            client_id=client_id,
            status=status,
            email=email,
            email_verified=email_verified,
            is_private_email=is_private_email,
            email_forwarding_enabled=email_forwarding_enabled,
            given_name=given_name,
            family_name=family_name,
            real_user_status=real_user_status,
            org_id=org_id,
            created_at=created_at,
            last_sign_in_at=last_sign_in_at,
            refresh_token=refresh_token,
            purge=purge,
        )

        user.additional_properties = d
        return user

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
