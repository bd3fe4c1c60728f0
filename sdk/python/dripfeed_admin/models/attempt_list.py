from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.endpoint_copy import EndpointCopy





T = TypeVar("T", bound="AttemptList")



@_attrs_define
class AttemptList:
    """ A page of an endpoint's copies, newest first.

        Attributes:
            copies (list[EndpointCopy]):
            next_cursor (None | str | Unset): Where the next (older) page starts (`cursor`); `null` on the last.
                A page reads at most 10,000 of the application's events: it may
                hold fewer than `limit` (none, even) and name a next one; follow
                the cursor until it is `null`.
     """

    copies: list[EndpointCopy]
    next_cursor: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.endpoint_copy import EndpointCopy # noqa: PLC0415
        copies = []
        for copies_item_data in self.copies:
            copies_item = copies_item_data.to_dict()
            copies.append(copies_item)



        next_cursor: None | str | Unset
        if isinstance(self.next_cursor, Unset):
            next_cursor = UNSET
        else:
            next_cursor = self.next_cursor


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "copies": copies,
        })
        if next_cursor is not UNSET:
            field_dict["next_cursor"] = next_cursor

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.endpoint_copy import EndpointCopy # noqa: PLC0415
        d = dict(src_dict)
        copies = []
        _copies = d.pop("copies")
        for copies_item_data in (_copies):
            copies_item = EndpointCopy.from_dict(copies_item_data)



            copies.append(copies_item)


        def _parse_next_cursor(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_cursor = _parse_next_cursor(d.pop("next_cursor", UNSET))


        attempt_list = cls(
            copies=copies,
            next_cursor=next_cursor,
        )


        attempt_list.additional_properties = d
        return attempt_list

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
