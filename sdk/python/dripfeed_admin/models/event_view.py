from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.copy_view import CopyView





T = TypeVar("T", bound="EventView")



@_attrs_define
class EventView:
    """ An event.

        Attributes:
            application (str): Its application.
            created_at_ms (int): When it was taken, ms since the Unix epoch.
            endpoints (int): The endpoints it went to.
            id (str): Its id (each copy's `webhook-id`). Example: 1764338411000000001.
            type_ (str): Its type. Example: invoice.paid.
            copies (list[CopyView] | None | Unset): Each endpoint's copy (`GET` of one event only).
            payload (Any | Unset): Its payload as posted, any JSON (`GET` of one event only).
            tenant (None | str | Unset): The tenant that posted it.
     """

    application: str
    created_at_ms: int
    endpoints: int
    id: str
    type_: str
    copies: list[CopyView] | None | Unset = UNSET
    payload: Any | Unset = UNSET
    tenant: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.copy_view import CopyView # noqa: PLC0415
        application = self.application

        created_at_ms = self.created_at_ms

        endpoints = self.endpoints

        id = self.id

        type_ = self.type_

        copies: list[dict[str, Any]] | None | Unset
        if isinstance(self.copies, Unset):
            copies = UNSET
        elif isinstance(self.copies, list):
            copies = []
            for copies_type_0_item_data in self.copies:
                copies_type_0_item = copies_type_0_item_data.to_dict()
                copies.append(copies_type_0_item)


        else:
            copies = self.copies

        payload = self.payload

        tenant: None | str | Unset
        if isinstance(self.tenant, Unset):
            tenant = UNSET
        else:
            tenant = self.tenant


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "application": application,
            "created_at_ms": created_at_ms,
            "endpoints": endpoints,
            "id": id,
            "type": type_,
        })
        if copies is not UNSET:
            field_dict["copies"] = copies
        if payload is not UNSET:
            field_dict["payload"] = payload
        if tenant is not UNSET:
            field_dict["tenant"] = tenant

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.copy_view import CopyView # noqa: PLC0415
        d = dict(src_dict)
        application = d.pop("application")

        created_at_ms = d.pop("created_at_ms")

        endpoints = d.pop("endpoints")

        id = d.pop("id")

        type_ = d.pop("type")

        def _parse_copies(data: object) -> list[CopyView] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                copies_type_0 = []
                _copies_type_0 = data
                for copies_type_0_item_data in (_copies_type_0):
                    copies_type_0_item = CopyView.from_dict(copies_type_0_item_data)



                    copies_type_0.append(copies_type_0_item)

                return copies_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[CopyView] | None | Unset, data)

        copies = _parse_copies(d.pop("copies", UNSET))


        payload = d.pop("payload", UNSET)

        def _parse_tenant(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tenant = _parse_tenant(d.pop("tenant", UNSET))


        event_view = cls(
            application=application,
            created_at_ms=created_at_ms,
            endpoints=endpoints,
            id=id,
            type_=type_,
            copies=copies,
            payload=payload,
            tenant=tenant,
        )


        event_view.additional_properties = d
        return event_view

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
