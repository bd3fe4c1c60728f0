from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.state import State
from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="WebhookStatus")



@_attrs_define
class WebhookStatus:
    """ A webhook's status.

        Attributes:
            attempts (int): Delivery attempts made so far.
            id (str): The webhook's id, as its 202 named it.
            state (State): Where a webhook is: `queued`, `in_flight`, `retry_waiting` (see
                `next_attempt_at`), `delivered` or `dead_lettered`.
            destination (None | str | Unset): The destination it goes to.
            ended_at (None | str | Unset): When it was delivered or dead-lettered (RFC 3339).
            last_error (None | str | Unset): Its last failed attempt's error, `kind: message` (kind `dns`,
                `connect`, `tls`, `timeout`, `closed`, `status`, `too_large` or
                `refused`); `null` if none failed.
            last_status (int | None | Unset): The receiver's last HTTP status; `null` before any answer.
            next_attempt_at (None | str | Unset): When the next attempt is due (RFC 3339), while `retry_waiting`.
            received_at (None | str | Unset): When the relay received it (RFC 3339).
     """

    attempts: int
    id: str
    state: State
    destination: None | str | Unset = UNSET
    ended_at: None | str | Unset = UNSET
    last_error: None | str | Unset = UNSET
    last_status: int | None | Unset = UNSET
    next_attempt_at: None | str | Unset = UNSET
    received_at: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        attempts = self.attempts

        id = self.id

        state = self.state.value

        destination: None | str | Unset
        if isinstance(self.destination, Unset):
            destination = UNSET
        else:
            destination = self.destination

        ended_at: None | str | Unset
        if isinstance(self.ended_at, Unset):
            ended_at = UNSET
        else:
            ended_at = self.ended_at

        last_error: None | str | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        else:
            last_error = self.last_error

        last_status: int | None | Unset
        if isinstance(self.last_status, Unset):
            last_status = UNSET
        else:
            last_status = self.last_status

        next_attempt_at: None | str | Unset
        if isinstance(self.next_attempt_at, Unset):
            next_attempt_at = UNSET
        else:
            next_attempt_at = self.next_attempt_at

        received_at: None | str | Unset
        if isinstance(self.received_at, Unset):
            received_at = UNSET
        else:
            received_at = self.received_at


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "attempts": attempts,
            "id": id,
            "state": state,
        })
        if destination is not UNSET:
            field_dict["destination"] = destination
        if ended_at is not UNSET:
            field_dict["ended_at"] = ended_at
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if last_status is not UNSET:
            field_dict["last_status"] = last_status
        if next_attempt_at is not UNSET:
            field_dict["next_attempt_at"] = next_attempt_at
        if received_at is not UNSET:
            field_dict["received_at"] = received_at

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        attempts = d.pop("attempts")

        id = d.pop("id")

        state = State(d.pop("state"))




        def _parse_destination(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        destination = _parse_destination(d.pop("destination", UNSET))


        def _parse_ended_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        ended_at = _parse_ended_at(d.pop("ended_at", UNSET))


        def _parse_last_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_error = _parse_last_error(d.pop("last_error", UNSET))


        def _parse_last_status(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        last_status = _parse_last_status(d.pop("last_status", UNSET))


        def _parse_next_attempt_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_attempt_at = _parse_next_attempt_at(d.pop("next_attempt_at", UNSET))


        def _parse_received_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        received_at = _parse_received_at(d.pop("received_at", UNSET))


        webhook_status = cls(
            attempts=attempts,
            id=id,
            state=state,
            destination=destination,
            ended_at=ended_at,
            last_error=last_error,
            last_status=last_status,
            next_attempt_at=next_attempt_at,
            received_at=received_at,
        )


        webhook_status.additional_properties = d
        return webhook_status

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
