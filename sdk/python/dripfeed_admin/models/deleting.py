from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="Deleting")



@_attrs_define
class Deleting:
    """ What a `DELETE` left to drain.

        Attributes:
            grace_ms (int): The time it has to deliver them, ms (the shutdown grace).
            held (int): Webhooks it held when deleted (with `queue = redis`: the fleet's
                queue for it): delivered within `grace_ms`, then dead-lettered.
            name (str): The destination.
     """

    grace_ms: int
    held: int
    name: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        grace_ms = self.grace_ms

        held = self.held

        name = self.name


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "grace_ms": grace_ms,
            "held": held,
            "name": name,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        grace_ms = d.pop("grace_ms")

        held = d.pop("held")

        name = d.pop("name")

        deleting = cls(
            grace_ms=grace_ms,
            held=held,
            name=name,
        )


        deleting.additional_properties = d
        return deleting

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
