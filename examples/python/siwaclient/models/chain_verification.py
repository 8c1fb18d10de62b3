from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.chain_verification_head_type_0 import ChainVerificationHeadType0


T = TypeVar("T", bound="ChainVerification")


@_attrs_define
class ChainVerification:
    """
    Attributes:
        ok (bool):
        rows (int): sealed rows verified
        unsealed (int):
        head (ChainVerificationHeadType0 | None): the chain's head, null while it is empty
        broken_at (int | Unset): where the chain breaks; absent when it holds
        reason (str | Unset):
    """

    ok: bool
    rows: int
    unsealed: int
    head: ChainVerificationHeadType0 | None
    broken_at: int | Unset = UNSET
    reason: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.chain_verification_head_type_0 import ChainVerificationHeadType0

        ok = self.ok

        rows = self.rows

        unsealed = self.unsealed

        head: dict[str, Any] | None
        if isinstance(self.head, ChainVerificationHeadType0):
            head = self.head.to_dict()
        else:
            head = self.head

        broken_at = self.broken_at

        reason = self.reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ok": ok,
                "rows": rows,
                "unsealed": unsealed,
                "head": head,
            }
        )
        if broken_at is not UNSET:
            field_dict["broken_at"] = broken_at
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.chain_verification_head_type_0 import ChainVerificationHeadType0

        d = dict(src_dict)
        ok = d.pop("ok")

        rows = d.pop("rows")

        unsealed = d.pop("unsealed")

        def _parse_head(data: object) -> ChainVerificationHeadType0 | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                head_type_0 = ChainVerificationHeadType0.from_dict(data)

                return head_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ChainVerificationHeadType0 | None, data)

        head = _parse_head(d.pop("head"))

        broken_at = d.pop("broken_at", UNSET)

        reason = d.pop("reason", UNSET)

        chain_verification = cls(
            ok=ok,
            rows=rows,
            unsealed=unsealed,
            head=head,
            broken_at=broken_at,
            reason=reason,
        )

        chain_verification.additional_properties = d
        return chain_verification

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
