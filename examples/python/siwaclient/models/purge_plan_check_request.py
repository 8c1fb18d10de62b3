from __future__ import annotations

from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    Self,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PurgePlanCheckRequest")


@_attrs_define
class PurgePlanCheckRequest:
    """What `siwa worker --check-plan` POSTs to every `http` step, with
    `webhook-id: siwa-check-<uuid>`: answer it 2xx and ignore it.

        Attributes:
            type_ (Literal['siwa.plan_check']):
            step (str): the step's name
            check_id (str): the same as the webhook-id
            test (bool):
    """

    type_: Literal["siwa.plan_check"]
    step: str
    check_id: str
    test: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        step = self.step

        check_id = self.check_id

        test = self.test

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "type": type_,
                "step": step,
                "check_id": check_id,
                "test": test,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        type_ = cast(Literal["siwa.plan_check"], d.pop("type"))
        if type_ != "siwa.plan_check":
            raise ValueError(f"type must match const 'siwa.plan_check', got '{type_}'")

        step = d.pop("step")

        check_id = d.pop("check_id")

        test = d.pop("test")

        purge_plan_check_request = cls(
            type_=type_,
            step=step,
            check_id=check_id,
            test=test,
        )

        purge_plan_check_request.additional_properties = d
        return purge_plan_check_request

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
