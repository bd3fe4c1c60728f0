from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="EventIn")



@_attrs_define
class EventIn:
    """ An event as posted.

        Attributes:
            payload (Any): What each endpoint receives as its body (any JSON), the event's
                id as `webhook-id` and its type as `webhook-event-type`.
            type_ (str): Its type: 1 to 128 of `A-Z a-z 0-9 . _ - :`, dot-separated parts
                (`invoice.paid`); endpoints subscribe to types and prefixes. Example: invoice.paid.
     """

    payload: Any
    type_: str





    def to_dict(self) -> dict[str, Any]:
        payload = self.payload

        type_ = self.type_


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "payload": payload,
            "type": type_,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        payload = d.pop("payload")

        type_ = d.pop("type")

        event_in = cls(
            payload=payload,
            type_=type_,
        )

        return event_in

