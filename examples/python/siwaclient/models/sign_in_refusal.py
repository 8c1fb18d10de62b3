from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.sign_in_reason_code import SignInReasonCode

T = TypeVar("T", bound="SignInRefusal")


@_attrs_define
class SignInRefusal:
    """
    Attributes:
        error (SignInReasonCode): why POST /v1/sign-in answered 400 - the identity token's codes
            (IdentityTokenReasonCode), then the sign-in's own
        detail (str): one of siwa's own sentences, never the request's bytes
    """

    error: SignInReasonCode
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
        error = SignInReasonCode(d.pop("error"))

        detail = d.pop("detail")

        sign_in_refusal = cls(
            error=error,
            detail=detail,
        )

        sign_in_refusal.additional_properties = d
        return sign_in_refusal

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
