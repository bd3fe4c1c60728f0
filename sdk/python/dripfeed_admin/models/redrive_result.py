from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.kept import Kept





T = TypeVar("T", bound="RedriveResult")



@_attrs_define
class RedriveResult:
    """ What a redrive did.

        Attributes:
            kept (list[Kept]): Letters that stay where they are, each with why: the destination
                they came from is gone (a letter goes back only there), or they do
                not read.
            more (bool): Whether more letters of the request remain (past 1000): ask again.
            readmitted (int): Letters admitted again (and marked: never redriven twice).
            refused (int): Letters refused for now (a full queue or byte budget): left to
                redrive later.
            settled (int): Letters of event copies sent again since they were dead-lettered
                (a recover, a resend): marked, nothing sent again.
     """

    kept: list[Kept]
    more: bool
    readmitted: int
    refused: int
    settled: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.kept import Kept # noqa: PLC0415
        kept = []
        for kept_item_data in self.kept:
            kept_item = kept_item_data.to_dict()
            kept.append(kept_item)



        more = self.more

        readmitted = self.readmitted

        refused = self.refused

        settled = self.settled


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "kept": kept,
            "more": more,
            "readmitted": readmitted,
            "refused": refused,
            "settled": settled,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.kept import Kept # noqa: PLC0415
        d = dict(src_dict)
        kept = []
        _kept = d.pop("kept")
        for kept_item_data in (_kept):
            kept_item = Kept.from_dict(kept_item_data)



            kept.append(kept_item)


        more = d.pop("more")

        readmitted = d.pop("readmitted")

        refused = d.pop("refused")

        settled = d.pop("settled")

        redrive_result = cls(
            kept=kept,
            more=more,
            readmitted=readmitted,
            refused=refused,
            settled=settled,
        )


        redrive_result.additional_properties = d
        return redrive_result

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
