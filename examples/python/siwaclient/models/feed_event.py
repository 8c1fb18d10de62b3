from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.app_event_envelope import AppEventEnvelope


T = TypeVar("T", bound="FeedEvent")


@_attrs_define
class FeedEvent:
    """
    Attributes:
        id (str): the event's webhook-id, `evt_<audit seq>_<n>`
        event (AppEventEnvelope): an app event exactly as its webhook's body (`webhooks` has each type's schema):
            `type`, `timestamp` (ISO 8601, UTC), `data`
    """

    id: str
    event: AppEventEnvelope
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        event = self.event.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "event": event,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.app_event_envelope import AppEventEnvelope

        d = dict(src_dict)
        id = d.pop("id")

        event = AppEventEnvelope.from_dict(d.pop("event"))

        feed_event = cls(
            id=id,
            event=event,
        )

        feed_event.additional_properties = d
        return feed_event

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
