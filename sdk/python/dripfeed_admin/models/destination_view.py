from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.destination_view_filter_type_0 import DestinationViewFilterType0
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
            application (None | str | Unset): The application whose endpoint it is; absent: a destination that
                takes webhooks by name (`X-Destination`), no event. Example: acme.
            ceiling (float | None | Unset): Its adaptive ceiling, webhooks/s, if adaptive.
            description (None | str | Unset): What the endpoint is, for people.
            disabled (bool | None | Unset): Whether the endpoint is disabled (it takes no new event).
            event_types (list[str] | None | Unset): An endpoint's event types: exact names and `prefix.*`; empty: every
                type. Example: ['invoice.*'].
            filter_ (DestinationViewFilterType0 | None | Unset): An endpoint's payload filter: each key a field's dotted
                path, each
                value what it must equal.
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
    application: None | str | Unset = UNSET
    ceiling: float | None | Unset = UNSET
    description: None | str | Unset = UNSET
    disabled: bool | None | Unset = UNSET
    event_types: list[str] | None | Unset = UNSET
    filter_: DestinationViewFilterType0 | None | Unset = UNSET
    last_error: LastError | None | Unset = UNSET
    live: Live | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.destination_view_filter_type_0 import DestinationViewFilterType0 # noqa: PLC0415
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

        application: None | str | Unset
        if isinstance(self.application, Unset):
            application = UNSET
        else:
            application = self.application

        ceiling: float | None | Unset
        if isinstance(self.ceiling, Unset):
            ceiling = UNSET
        else:
            ceiling = self.ceiling

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        disabled: bool | None | Unset
        if isinstance(self.disabled, Unset):
            disabled = UNSET
        else:
            disabled = self.disabled

        event_types: list[str] | None | Unset
        if isinstance(self.event_types, Unset):
            event_types = UNSET
        elif isinstance(self.event_types, list):
            event_types = self.event_types


        else:
            event_types = self.event_types

        filter_: dict[str, Any] | None | Unset
        if isinstance(self.filter_, Unset):
            filter_ = UNSET
        elif isinstance(self.filter_, DestinationViewFilterType0):
            filter_ = self.filter_.to_dict()
        else:
            filter_ = self.filter_

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
        if application is not UNSET:
            field_dict["application"] = application
        if ceiling is not UNSET:
            field_dict["ceiling"] = ceiling
        if description is not UNSET:
            field_dict["description"] = description
        if disabled is not UNSET:
            field_dict["disabled"] = disabled
        if event_types is not UNSET:
            field_dict["event_types"] = event_types
        if filter_ is not UNSET:
            field_dict["filter"] = filter_
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if live is not UNSET:
            field_dict["live"] = live

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.destination_view_filter_type_0 import DestinationViewFilterType0 # noqa: PLC0415
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

        def _parse_application(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        application = _parse_application(d.pop("application", UNSET))


        def _parse_ceiling(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        ceiling = _parse_ceiling(d.pop("ceiling", UNSET))


        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))


        def _parse_disabled(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        disabled = _parse_disabled(d.pop("disabled", UNSET))


        def _parse_event_types(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                event_types_type_0 = cast(list[str], data)

                return event_types_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        event_types = _parse_event_types(d.pop("event_types", UNSET))


        def _parse_filter_(data: object) -> DestinationViewFilterType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = DestinationViewFilterType0.from_dict(data)



                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DestinationViewFilterType0 | None | Unset, data)

        filter_ = _parse_filter_(d.pop("filter", UNSET))


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
            application=application,
            ceiling=ceiling,
            description=description,
            disabled=disabled,
            event_types=event_types,
            filter_=filter_,
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
