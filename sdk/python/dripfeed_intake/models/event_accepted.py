from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="EventAccepted")



@_attrs_define
class EventAccepted:
    """ `POST /v1/applications/{app}/events`: taken.

        Attributes:
            endpoints (int): The endpoints it went to (subscribed to its type, enabled, its
                payload passing their filters); 0 is taken too.
            id (str): The event's id: each endpoint sees it as `webhook-id` (and
                `idempotency-key`); `GET /v1/applications/{app}/events/{id}` on the
                admin listener shows each copy and attempt. Example: 1764338411000000001.
            status (str): `queued`, or `duplicate` (an `Idempotency-Key` taken before:
                nothing new was queued, and `endpoints` is what it went to then). Example: queued.
     """

    endpoints: int
    id: str
    status: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        endpoints = self.endpoints

        id = self.id

        status = self.status


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "endpoints": endpoints,
            "id": id,
            "status": status,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        endpoints = d.pop("endpoints")

        id = d.pop("id")

        status = d.pop("status")

        event_accepted = cls(
            endpoints=endpoints,
            id=id,
            status=status,
        )


        event_accepted.additional_properties = d
        return event_accepted

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
