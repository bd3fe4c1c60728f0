from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.down import Down





T = TypeVar("T", bound="NotReady")



@_attrs_define
class NotReady:
    """ `GET /readyz`: not ready, a problem naming what is down.

        Attributes:
            detail (str): What is down, in words.
            down (list[Down]): Each thing down.
            status (int): 503.
            title (str): `Service Unavailable`.
            type_ (str): `urn:dripfeed:problem:not-ready`.
     """

    detail: str
    down: list[Down]
    status: int
    title: str
    type_: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.down import Down # noqa: PLC0415
        detail = self.detail

        down = []
        for down_item_data in self.down:
            down_item = down_item_data.to_dict()
            down.append(down_item)



        status = self.status

        title = self.title

        type_ = self.type_


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "detail": detail,
            "down": down,
            "status": status,
            "title": title,
            "type": type_,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.down import Down # noqa: PLC0415
        d = dict(src_dict)
        detail = d.pop("detail")

        down = []
        _down = d.pop("down")
        for down_item_data in (_down):
            down_item = Down.from_dict(down_item_data)



            down.append(down_item)


        status = d.pop("status")

        title = d.pop("title")

        type_ = d.pop("type")

        not_ready = cls(
            detail=detail,
            down=down,
            status=status,
            title=title,
            type_=type_,
        )


        not_ready.additional_properties = d
        return not_ready

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
