from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="Resend")



@_attrs_define
class Resend:
    """ `POST /v1/applications/{app}/events/{id}/resend`.

        Attributes:
            endpoint (str): The endpoint to send the event to again.
     """

    endpoint: str





    def to_dict(self) -> dict[str, Any]:
        endpoint = self.endpoint


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "endpoint": endpoint,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        endpoint = d.pop("endpoint")

        resend = cls(
            endpoint=endpoint,
        )

        return resend

