from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="LastError")



@_attrs_define
class LastError:
    """ A destination's last error, as the admin API shows it.

        Attributes:
            at_unix_ms (int): When, ms since the Unix epoch.
            count (int): Errors it met since the relay started.
            kind (str): `dns`, `connect`, `tls`, `timeout`, `closed`, `status`, `too_large`
                or `refused`.
            message (str): What happened (for `tls`, the certificate error).
     """

    at_unix_ms: int
    count: int
    kind: str
    message: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        at_unix_ms = self.at_unix_ms

        count = self.count

        kind = self.kind

        message = self.message


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "at_unix_ms": at_unix_ms,
            "count": count,
            "kind": kind,
            "message": message,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        at_unix_ms = d.pop("at_unix_ms")

        count = d.pop("count")

        kind = d.pop("kind")

        message = d.pop("message")

        last_error = cls(
            at_unix_ms=at_unix_ms,
            count=count,
            kind=kind,
            message=message,
        )


        last_error.additional_properties = d
        return last_error

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
