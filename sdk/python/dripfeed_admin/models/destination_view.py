from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.last_error import LastError
  from ..models.live import Live





T = TypeVar("T", bound="DestinationView")



@_attrs_define
class DestinationView:
    """ A destination as `GET /v1/destinations` shows it (never its secret).

        Attributes:
            budget_ms (int): Its latency budget, ms.
            deleting (bool): Whether it is being deleted: new webhooks get 404, what it holds
                is still delivered within the shutdown grace, then dead-lettered.
            metrics (bool): Whether it has its own metric series (label `destination` = its
                name) or is summed into `_other`: as its `metrics` field says,
                else yes when configured, no when made through the admin API.
            name (str): Its name (the destination header's value).
            origin (str): Where it was configured (a file and line, a flag, a variable, or
                the admin API and its registry).
            previous_secret_set (bool): Whether a previous secret is set: deliveries are signed with both.
            rate (float): Its drain rate, webhooks/s, as configured.
            secret_set (bool): Whether a signing secret is set (the secret is never shown).
            url (str): Where its webhooks are delivered (a password in it shown as `***`).
            ceiling (float | None | Unset): Its adaptive ceiling, webhooks/s, if adaptive.
            last_error (LastError | None | Unset):
            live (Live | None | Unset):
     """

    budget_ms: int
    deleting: bool
    metrics: bool
    name: str
    origin: str
    previous_secret_set: bool
    rate: float
    secret_set: bool
    url: str
    ceiling: float | None | Unset = UNSET
    last_error: LastError | None | Unset = UNSET
    live: Live | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.last_error import LastError # noqa: PLC0415
        from ..models.live import Live # noqa: PLC0415
        budget_ms = self.budget_ms

        deleting = self.deleting

        metrics = self.metrics

        name = self.name

        origin = self.origin

        previous_secret_set = self.previous_secret_set

        rate = self.rate

        secret_set = self.secret_set

        url = self.url

        ceiling: float | None | Unset
        if isinstance(self.ceiling, Unset):
            ceiling = UNSET
        else:
            ceiling = self.ceiling

        last_error: dict[str, Any] | None | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        elif isinstance(self.last_error, LastError):
            last_error = self.last_error.to_dict()
        else:
            last_error = self.last_error

        live: dict[str, Any] | None | Unset
        if isinstance(self.live, Unset):
            live = UNSET
        elif isinstance(self.live, Live):
            live = self.live.to_dict()
        else:
            live = self.live


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "budget_ms": budget_ms,
            "deleting": deleting,
            "metrics": metrics,
            "name": name,
            "origin": origin,
            "previous_secret_set": previous_secret_set,
            "rate": rate,
            "secret_set": secret_set,
            "url": url,
        })
        if ceiling is not UNSET:
            field_dict["ceiling"] = ceiling
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if live is not UNSET:
            field_dict["live"] = live

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.last_error import LastError # noqa: PLC0415
        from ..models.live import Live # noqa: PLC0415
        d = dict(src_dict)
        budget_ms = d.pop("budget_ms")

        deleting = d.pop("deleting")

        metrics = d.pop("metrics")

        name = d.pop("name")

        origin = d.pop("origin")

        previous_secret_set = d.pop("previous_secret_set")

        rate = d.pop("rate")

        secret_set = d.pop("secret_set")

        url = d.pop("url")

        def _parse_ceiling(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        ceiling = _parse_ceiling(d.pop("ceiling", UNSET))


        def _parse_last_error(data: object) -> LastError | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                last_error_type_1 = LastError.from_dict(data)



                return last_error_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LastError | None | Unset, data)

        last_error = _parse_last_error(d.pop("last_error", UNSET))


        def _parse_live(data: object) -> Live | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                live_type_1 = Live.from_dict(data)



                return live_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Live | None | Unset, data)

        live = _parse_live(d.pop("live", UNSET))


        destination_view = cls(
            budget_ms=budget_ms,
            deleting=deleting,
            metrics=metrics,
            name=name,
            origin=origin,
            previous_secret_set=previous_secret_set,
            rate=rate,
            secret_set=secret_set,
            url=url,
            ceiling=ceiling,
            last_error=last_error,
            live=live,
        )


        destination_view.additional_properties = d
        return destination_view

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
