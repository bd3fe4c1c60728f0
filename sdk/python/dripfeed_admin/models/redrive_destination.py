from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="RedriveDestination")



@_attrs_define
class RedriveDestination:
    """ Every dead letter of a destination.

        Attributes:
            destination (str): The destination's name.
     """

    destination: str





    def to_dict(self) -> dict[str, Any]:
        destination = self.destination


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "destination": destination,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        destination = d.pop("destination")

        redrive_destination = cls(
            destination=destination,
        )

        return redrive_destination

