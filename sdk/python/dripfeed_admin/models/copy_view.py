from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.attempt_view import AttemptView





T = TypeVar("T", bound="CopyView")



@_attrs_define
class CopyView:
    """ One endpoint's copy of an event.

        Attributes:
            attempts (list[AttemptView]): Its attempts, oldest first (the latest 64).
            endpoint (str): The endpoint.
            resent (int): Times it was sent again (resend, recover).
            state (str): `pending` (queued, waiting for a retry, or in flight), `delivered`
                or `dead_lettered`. Example: delivered.
            reason (None | str | Unset): Why it was dead-lettered: `failed` (retries spent, or a final answer),
                `overflow`, `expired`, `shutdown`, `destination-deleted`,
                `application-deleted`…
     """

    attempts: list[AttemptView]
    endpoint: str
    resent: int
    state: str
    reason: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.attempt_view import AttemptView # noqa: PLC0415
        attempts = []
        for attempts_item_data in self.attempts:
            attempts_item = attempts_item_data.to_dict()
            attempts.append(attempts_item)



        endpoint = self.endpoint

        resent = self.resent

        state = self.state

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "attempts": attempts,
            "endpoint": endpoint,
            "resent": resent,
            "state": state,
        })
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.attempt_view import AttemptView # noqa: PLC0415
        d = dict(src_dict)
        attempts = []
        _attempts = d.pop("attempts")
        for attempts_item_data in (_attempts):
            attempts_item = AttemptView.from_dict(attempts_item_data)



            attempts.append(attempts_item)


        endpoint = d.pop("endpoint")

        resent = d.pop("resent")

        state = d.pop("state")

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))


        copy_view = cls(
            attempts=attempts,
            endpoint=endpoint,
            resent=resent,
            state=state,
            reason=reason,
        )


        copy_view.additional_properties = d
        return copy_view

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
