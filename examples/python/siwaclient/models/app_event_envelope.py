from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.app_event_envelope_data import AppEventEnvelopeData


T = TypeVar("T", bound="AppEventEnvelope")


@_attrs_define
class AppEventEnvelope:
    """an app event exactly as its webhook's body (`webhooks` has each type's schema): `type`, `timestamp` (ISO 8601, UTC),
    `data`

        Attributes:
            type_ (str):
            timestamp (str): when the event happened (Apple's event_time for Apple's events), ISO 8601 in UTC
            data (AppEventEnvelopeData): the type's data (every one names `sub`)
    """

    type_: str
    timestamp: str
    data: AppEventEnvelopeData
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        timestamp = self.timestamp

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
        from ..models.app_event_envelope_data import AppEventEnvelopeData

        d = dict(src_dict)
        type_ = d.pop("type")

        timestamp = d.pop("timestamp")

        data = AppEventEnvelopeData.from_dict(d.pop("data"))

        app_event_envelope = cls(
            type_=type_,
            timestamp=timestamp,
            data=data,
        )

        app_event_envelope.additional_properties = d
        return app_event_envelope

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
