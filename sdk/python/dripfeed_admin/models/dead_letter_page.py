from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.dead_letter import DeadLetter





T = TypeVar("T", bound="DeadLetterPage")



@_attrs_define
class DeadLetterPage:
    """ A page of dead letters.

        Attributes:
            dead_letters (list[DeadLetter]): The lines, oldest first.
            more (bool): Whether the page stopped at its limit, so more lines follow now.
            next_cursor (None | str | Unset): Where the next page starts: pass it as `cursor` (also once this page
                reached the end: later lines follow from there). `null` while there
                is no dead-letter file.
     """

    dead_letters: list[DeadLetter]
    more: bool
    next_cursor: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.dead_letter import DeadLetter # noqa: PLC0415
        dead_letters = []
        for dead_letters_item_data in self.dead_letters:
            dead_letters_item = dead_letters_item_data.to_dict()
            dead_letters.append(dead_letters_item)



        more = self.more

        next_cursor: None | str | Unset
        if isinstance(self.next_cursor, Unset):
            next_cursor = UNSET
        else:
            next_cursor = self.next_cursor


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "dead_letters": dead_letters,
            "more": more,
        })
        if next_cursor is not UNSET:
            field_dict["next_cursor"] = next_cursor

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.dead_letter import DeadLetter # noqa: PLC0415
        d = dict(src_dict)
        dead_letters = []
        _dead_letters = d.pop("dead_letters")
        for dead_letters_item_data in (_dead_letters):
            dead_letters_item = DeadLetter.from_dict(dead_letters_item_data)



            dead_letters.append(dead_letters_item)


        more = d.pop("more")

        def _parse_next_cursor(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_cursor = _parse_next_cursor(d.pop("next_cursor", UNSET))


        dead_letter_page = cls(
            dead_letters=dead_letters,
            more=more,
            next_cursor=next_cursor,
        )


        dead_letter_page.additional_properties = d
        return dead_letter_page

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
