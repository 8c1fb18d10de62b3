from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Self,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.token_invalid_grant_event_data import TokenInvalidGrantEventData


T = TypeVar("T", bound="TokenInvalidGrantEvent")


@_attrs_define
class TokenInvalidGrantEvent:
    """
    Attributes:
        type_ (Literal['token.invalid_grant']):
        timestamp (datetime.datetime): when the event happened (Apple's event_time for Apple's events), ISO 8601 in UTC
        data (TokenInvalidGrantEventData):
    """

    type_: Literal["token.invalid_grant"]
    timestamp: datetime.datetime
    data: TokenInvalidGrantEventData
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        timestamp = self.timestamp.isoformat()

        data = self.data.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "type": type_,
                "timestamp": timestamp,
                "data": data,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.token_invalid_grant_event_data import TokenInvalidGrantEventData

        d = dict(src_dict)
        type_ = cast(Literal["token.invalid_grant"], d.pop("type"))
        if type_ != "token.invalid_grant":
            raise ValueError(
                f"type must match const 'token.invalid_grant', got '{type_}'"
            )

        timestamp = datetime.datetime.fromisoformat(d.pop("timestamp"))

        data = TokenInvalidGrantEventData.from_dict(d.pop("data"))

        token_invalid_grant_event = cls(
            type_=type_,
            timestamp=timestamp,
            data=data,
        )

        token_invalid_grant_event.additional_properties = d
        return token_invalid_grant_event

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
