from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="DeadLetter")



@_attrs_define
class DeadLetter:
    """ One dead-letter line as the admin API shows it.

        Attributes:
            attempts (int): Attempts made.
            destination (str): Its destination.
            reason (str): Why it was dead-lettered: `failed`, `expired`, `evicted`, `overflow`, `shutdown`, ….
            received_unix_ms (int): When the relay received it, ms since the Unix epoch.
            body (None | str | Unset): Its body, when it is UTF-8.
            body_base64 (None | str | Unset): Its body in base64, when it is not UTF-8.
            content_type (None | str | Unset): Its content type.
            error (None | str | Unset): Why no request was sent (the address guard's refusal).
            event_type (None | str | Unset): An event's copy: the event's type (its id is the event's).
            id (None | str | Unset): The webhook's id (absent if it was never tried).
            last_status (int | None | Unset): The receiver's last status.
            tenant (None | str | Unset): The tenant that sent it.
     """

    attempts: int
    destination: str
    reason: str
    received_unix_ms: int
    body: None | str | Unset = UNSET
    body_base64: None | str | Unset = UNSET
    content_type: None | str | Unset = UNSET
    error: None | str | Unset = UNSET
    event_type: None | str | Unset = UNSET
    id: None | str | Unset = UNSET
    last_status: int | None | Unset = UNSET
    tenant: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        attempts = self.attempts

        destination = self.destination

        reason = self.reason

        received_unix_ms = self.received_unix_ms

        body: None | str | Unset
        if isinstance(self.body, Unset):
            body = UNSET
        else:
            body = self.body

        body_base64: None | str | Unset
        if isinstance(self.body_base64, Unset):
            body_base64 = UNSET
        else:
            body_base64 = self.body_base64

        content_type: None | str | Unset
        if isinstance(self.content_type, Unset):
            content_type = UNSET
        else:
            content_type = self.content_type

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        event_type: None | str | Unset
        if isinstance(self.event_type, Unset):
            event_type = UNSET
        else:
            event_type = self.event_type

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        else:
            id = self.id

        last_status: int | None | Unset
        if isinstance(self.last_status, Unset):
            last_status = UNSET
        else:
            last_status = self.last_status

        tenant: None | str | Unset
        if isinstance(self.tenant, Unset):
            tenant = UNSET
        else:
            tenant = self.tenant


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "attempts": attempts,
            "destination": destination,
            "reason": reason,
            "received_unix_ms": received_unix_ms,
        })
        if body is not UNSET:
            field_dict["body"] = body
        if body_base64 is not UNSET:
            field_dict["body_base64"] = body_base64
        if content_type is not UNSET:
            field_dict["content_type"] = content_type
        if error is not UNSET:
            field_dict["error"] = error
        if event_type is not UNSET:
            field_dict["event_type"] = event_type
        if id is not UNSET:
            field_dict["id"] = id
        if last_status is not UNSET:
            field_dict["last_status"] = last_status
        if tenant is not UNSET:
            field_dict["tenant"] = tenant

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        attempts = d.pop("attempts")

        destination = d.pop("destination")

        reason = d.pop("reason")

        received_unix_ms = d.pop("received_unix_ms")

        def _parse_body(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        body = _parse_body(d.pop("body", UNSET))


        def _parse_body_base64(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        body_base64 = _parse_body_base64(d.pop("body_base64", UNSET))


        def _parse_content_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        content_type = _parse_content_type(d.pop("content_type", UNSET))


        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))


        def _parse_event_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        event_type = _parse_event_type(d.pop("event_type", UNSET))


        def _parse_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        id = _parse_id(d.pop("id", UNSET))


        def _parse_last_status(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        last_status = _parse_last_status(d.pop("last_status", UNSET))


        def _parse_tenant(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tenant = _parse_tenant(d.pop("tenant", UNSET))


        dead_letter = cls(
            attempts=attempts,
            destination=destination,
            reason=reason,
            received_unix_ms=received_unix_ms,
            body=body,
            body_base64=body_base64,
            content_type=content_type,
            error=error,
            event_type=event_type,
            id=id,
            last_status=last_status,
            tenant=tenant,
        )


        dead_letter.additional_properties = d
        return dead_letter

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
