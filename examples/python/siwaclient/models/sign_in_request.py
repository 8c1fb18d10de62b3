from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.apple_user_object import AppleUserObject


T = TypeVar("T", bound="SignInRequest")


@_attrs_define
class SignInRequest:
    """
    Attributes:
        identity_token (str | Unset): the identity token Apple gave the app (a JWS)
        authorization_code (str | Unset): the authorization code Apple gave the app, exchanged at Apple's /auth/token
        client_id (str | Unset): the client id (required with a code alone; else, if given, must be the token's aud)
        nonce (str | Unset): the raw nonce the backend made (Apple's token carries its SHA-256)
        redirect_uri (str | Unset): a web client's redirect URI, exactly as in its authorization request
        user (AppleUserObject | str | Unset): Apple's `user` object (first authorization only), or, from a web client's
            form_post, the string of JSON holding it
    """

    identity_token: str | Unset = UNSET
    authorization_code: str | Unset = UNSET
    client_id: str | Unset = UNSET
    nonce: str | Unset = UNSET
    redirect_uri: str | Unset = UNSET
    user: AppleUserObject | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.apple_user_object import AppleUserObject

        identity_token = self.identity_token

        authorization_code = self.authorization_code

        client_id = self.client_id

        nonce = self.nonce

        redirect_uri = self.redirect_uri

        user: dict[str, Any] | str | Unset
        if isinstance(self.user, Unset):
            user = UNSET
        elif isinstance(self.user, AppleUserObject):
            user = self.user.to_dict()
        else:
            user = self.user

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if identity_token is not UNSET:
            field_dict["identity_token"] = identity_token
        if authorization_code is not UNSET:
            field_dict["authorization_code"] = authorization_code
        if client_id is not UNSET:
            field_dict["client_id"] = client_id
        if nonce is not UNSET:
            field_dict["nonce"] = nonce
        if redirect_uri is not UNSET:
            field_dict["redirect_uri"] = redirect_uri
        if user is not UNSET:
            field_dict["user"] = user

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.apple_user_object import AppleUserObject

        d = dict(src_dict)
        identity_token = d.pop("identity_token", UNSET)

        authorization_code = d.pop("authorization_code", UNSET)

        client_id = d.pop("client_id", UNSET)

        nonce = d.pop("nonce", UNSET)

        redirect_uri = d.pop("redirect_uri", UNSET)

        def _parse_user(data: object) -> AppleUserObject | str | Unset:
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                user_type_0 = AppleUserObject.from_dict(data)

                return user_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(AppleUserObject | str | Unset, data)

        user = _parse_user(d.pop("user", UNSET))

        sign_in_request = cls(
            identity_token=identity_token,
            authorization_code=authorization_code,
            client_id=client_id,
            nonce=nonce,
            redirect_uri=redirect_uri,
            user=user,
        )

        sign_in_request.additional_properties = d
        return sign_in_request

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
