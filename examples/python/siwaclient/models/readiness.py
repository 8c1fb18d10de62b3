from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.readiness_apple_keys import ReadinessAppleKeys
from ..models.readiness_database import ReadinessDatabase
from ..models.readiness_schema import ReadinessSchema
from ..models.readiness_status import ReadinessStatus
from ..types import UNSET, Unset

T = TypeVar("T", bound="Readiness")


@_attrs_define
class Readiness:
    """
    Attributes:
        status (ReadinessStatus):
        database (ReadinessDatabase):
        apple_keys (ReadinessAppleKeys | Unset): siwa serve only (the worker loads no Apple keys)
        schema (ReadinessSchema | Unset): siwa serve's metrics listener, while the schema is behind this siwa and serve
            waits for `siwa migrate` (its other listeners are not bound yet)
    """

    status: ReadinessStatus
    database: ReadinessDatabase
    apple_keys: ReadinessAppleKeys | Unset = UNSET
    schema: ReadinessSchema | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        status = self.status.value

        database = self.database.value

        apple_keys: str | Unset = UNSET
        if not isinstance(self.apple_keys, Unset):
            apple_keys = self.apple_keys.value

        schema: str | Unset = UNSET
        if not isinstance(self.schema, Unset):
            schema = self.schema.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
                "database": database,
            }
        )
        if apple_keys is not UNSET:
            field_dict["apple_keys"] = apple_keys
        if schema is not UNSET:
            field_dict["schema"] = schema

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        status = ReadinessStatus(d.pop("status"))

        database = ReadinessDatabase(d.pop("database"))

        _apple_keys = d.pop("apple_keys", UNSET)
        apple_keys: ReadinessAppleKeys | Unset
        if isinstance(_apple_keys, Unset):
            apple_keys = UNSET
        else:
            apple_keys = ReadinessAppleKeys(_apple_keys)

        _schema = d.pop("schema", UNSET)
        schema: ReadinessSchema | Unset
        if isinstance(_schema, Unset):
            schema = UNSET
        else:
            schema = ReadinessSchema(_schema)

        readiness = cls(
            status=status,
            database=database,
            apple_keys=apple_keys,
            schema=schema,
        )

        readiness.additional_properties = d
        return readiness

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
