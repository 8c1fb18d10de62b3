from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.deletion_apple_revocation import DeletionAppleRevocation
from ..models.deletion_status import DeletionStatus
from ..models.job_state import JobState
from ..types import UNSET, Unset

T = TypeVar("T", bound="Deletion")


@_attrs_define
class Deletion:
    """
    Attributes:
        status (DeletionStatus): `deletion_scheduled` (202), or `deleted` (200) for a user purged before
        job_id (int):
        job_state (JobState):
        apple_revocation (DeletionAppleRevocation | Unset): `scheduled` (siwa revokes the token before the purge) or
            `manual` (siwa holds none: the user removes the app at their Apple Account); absent for a user purged before
        apple_revocation_url (str | Unset): with `manual` only
    """

    status: DeletionStatus
    job_id: int
    job_state: JobState
    apple_revocation: DeletionAppleRevocation | Unset = UNSET
    apple_revocation_url: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        status = self.status.value

        job_id = self.job_id

        job_state = self.job_state.value

        apple_revocation: str | Unset = UNSET
        if not isinstance(self.apple_revocation, Unset):
            apple_revocation = self.apple_revocation.value

        apple_revocation_url = self.apple_revocation_url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
                "job_id": job_id,
                "job_state": job_state,
            }
        )
        if apple_revocation is not UNSET:
            field_dict["apple_revocation"] = apple_revocation
        if apple_revocation_url is not UNSET:
            field_dict["apple_revocation_url"] = apple_revocation_url

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        status = DeletionStatus(d.pop("status"))

        job_id = d.pop("job_id")

        job_state = JobState(d.pop("job_state"))

        _apple_revocation = d.pop("apple_revocation", UNSET)
        apple_revocation: DeletionAppleRevocation | Unset
        if isinstance(_apple_revocation, Unset):
            apple_revocation = UNSET
        else:
            apple_revocation = DeletionAppleRevocation(_apple_revocation)

        apple_revocation_url = d.pop("apple_revocation_url", UNSET)

        deletion = cls(
            status=status,
            job_id=job_id,
            job_state=job_state,
            apple_revocation=apple_revocation,
            apple_revocation_url=apple_revocation_url,
        )

        deletion.additional_properties = d
        return deletion

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
