from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.user_status import UserStatus

T = TypeVar("T", bound="SignedInUser")


@_attrs_define
class SignedInUser:
    """
    Attributes:
        user_id (int):
        apple_sub (str):
        team (str): the team of the token's client, whose sub apple_sub is
        client_id (None | str): the token's aud (for a retried request's first answer, the user's latest client id)
        is_new_user (bool):
        status (UserStatus):
        email (None | str):
        email_verified (bool | None):
        is_private_email (bool | None):
        given_name (None | str):
        family_name (None | str):
        real_user_status (int | None): 0 unsupported, 1 unknown, 2 likely real; a value Apple may add outside them is
            answered 1; null when Apple never said
        refresh_token_stored (bool):
    """

    user_id: int
    apple_sub: str
    team: str
    client_id: None | str
    is_new_user: bool
    status: UserStatus
    email: None | str
    email_verified: bool | None
    is_private_email: bool | None
    given_name: None | str
    family_name: None | str
    real_user_status: int | None
    refresh_token_stored: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        user_id = self.user_id

        apple_sub = self.apple_sub

        team = self.team

        client_id: None | str
        client_id = self.client_id

        is_new_user = self.is_new_user

        status = self.status.value

        email: None | str
        email = self.email

        email_verified: bool | None
        email_verified = self.email_verified

        is_private_email: bool | None
        is_private_email = self.is_private_email

        given_name: None | str
        given_name = self.given_name

        family_name: None | str
        family_name = self.family_name

        real_user_status: int | None
        real_user_status = self.real_user_status

        refresh_token_stored = self.refresh_token_stored

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "user_id": user_id,
                "apple_sub": apple_sub,
                "team": team,
                "client_id": client_id,
                "is_new_user": is_new_user,
                "status": status,
                "email": email,
                "email_verified": email_verified,
                "is_private_email": is_private_email,
                "given_name": given_name,
                "family_name": family_name,
                "real_user_status": real_user_status,
                "refresh_token_stored": refresh_token_stored,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        user_id = d.pop("user_id")

        apple_sub = d.pop("apple_sub")

        team = d.pop("team")

        def _parse_client_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        client_id = _parse_client_id(d.pop("client_id"))

        is_new_user = d.pop("is_new_user")

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

        refresh_token_stored = d.pop("refresh_token_stored")

        signed_in_user = cls(
            user_id=user_id,
            apple_sub=apple_sub,
            team=team,
            client_id=client_id,
            is_new_user=is_new_user,
            status=status,
            email=email,
            email_verified=email_verified,
            is_private_email=is_private_email,
            given_name=given_name,
            family_name=family_name,
            real_user_status=real_user_status,
            refresh_token_stored=refresh_token_stored,
        )

        signed_in_user.additional_properties = d
        return signed_in_user

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
