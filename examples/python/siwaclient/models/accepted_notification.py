from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.accepted_notification_status import AcceptedNotificationStatus

T = TypeVar("T", bound="AcceptedNotification")


@_attrs_define
class AcceptedNotification:
    """
    Attributes:
        status (AcceptedNotificationStatus):
        event_type (str): Apple's event type, at most 64 characters of it
        team (str): the team of the client the notification is for
        client_id (str): the notification's `aud`
    """

    status: AcceptedNotificationStatus
    event_type: str
    team: str
    client_id: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        status = self.status.value

        event_type = self.event_type

        team = self.team

        client_id = self.client_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
                "event_type": event_type,
                "team": team,
                "client_id": client_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        status = AcceptedNotificationStatus(d.pop("status"))

        event_type = d.pop("event_type")

        team = d.pop("team")

        client_id = d.pop("client_id")

        accepted_notification = cls(
            status=status,
            event_type=event_type,
            team=team,
            client_id=client_id,
        )

        accepted_notification.additional_properties = d
        return accepted_notification

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
