from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.destination_put_filter_type_0 import DestinationPutFilterType0





T = TypeVar("T", bound="DestinationPut")



@_attrs_define
class DestinationPut:
    """ A destination as `PUT` gives it: the whole of it.

        Attributes:
            url (str): Where its webhooks are POSTed: `http://` or `https://`, at an
                address the allow list lets deliveries reach. Example: https://billing.example.com/hooks.
            application (None | str | Unset): The application whose endpoint it is (1 to 64 of `A-Z a-z 0-9 . _
                -`; it must exist: 404 `unknown-application`, make it first with
                `PUT /v1/applications/{app}`). Fixed once set: a PUT that names
                another (or none) is a 422. Under
                `/v1/applications/{app}/endpoints` the path gives it. Example: acme.
            budget (None | str | Unset): Its latency budget, e.g. `"2s"` (absent: `latency_budget`). Example: 2s.
            ceiling (float | None | Unset): Its highest rate, webhooks/s (the AIMD ceiling when adaptive).
            description (None | str | Unset): What it is, for people (at most 1,024 bytes).
            disabled (bool | None | Unset): Disabled: it takes no new event (what it holds is still delivered).
            event_types (list[str] | None | Unset): The event types it takes: exact names (`invoice.paid`), prefixes
                (`invoice.*`) or `*`; absent or empty: every type. Example: ['invoice.*'].
            filter_ (DestinationPutFilterType0 | None | Unset): Equality on the payload's fields: each key a field's path
                (dotted:
                `customer.tier`), each value what it must equal. An event whose
                payload differs (or lacks one) is not sent to it.
            metrics (bool | None | Unset): Whether it has its own metric series (label `destination` = its
                name); absent: no, it is summed into `_other` (the busiest are
                shown by `dripfeed_relay_busiest` whatever this says).
            previous_secret (None | str | Unset): The secret being replaced (needs `secret`): each delivery is signed
                with both. Left out while the destination has one, the `PUT` is
                refused (422): give it again, or `null` to end the change of secret.
            rate (float | None | Unset): Its drain rate, webhooks/s (absent: `drain_rate`).
            secret (None | str | Unset): A Standard Webhooks signing secret, `whsec_` + base64 (not empty).
                Left out on a destination that signs, the `PUT` is refused (422):
                give it again, or `null` to stop signing.
     """

    url: str
    application: None | str | Unset = UNSET
    budget: None | str | Unset = UNSET
    ceiling: float | None | Unset = UNSET
    description: None | str | Unset = UNSET
    disabled: bool | None | Unset = UNSET
    event_types: list[str] | None | Unset = UNSET
    filter_: DestinationPutFilterType0 | None | Unset = UNSET
    metrics: bool | None | Unset = UNSET
    previous_secret: None | str | Unset = UNSET
    rate: float | None | Unset = UNSET
    secret: None | str | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        from ..models.destination_put_filter_type_0 import DestinationPutFilterType0 # noqa: PLC0415
        url = self.url

        application: None | str | Unset
        if isinstance(self.application, Unset):
            application = UNSET
        else:
            application = self.application

        budget: None | str | Unset
        if isinstance(self.budget, Unset):
            budget = UNSET
        else:
            budget = self.budget

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
        elif isinstance(self.filter_, DestinationPutFilterType0):
            filter_ = self.filter_.to_dict()
        else:
            filter_ = self.filter_

        metrics: bool | None | Unset
        if isinstance(self.metrics, Unset):
            metrics = UNSET
        else:
            metrics = self.metrics

        previous_secret: None | str | Unset
        if isinstance(self.previous_secret, Unset):
            previous_secret = UNSET
        else:
            previous_secret = self.previous_secret

        rate: float | None | Unset
        if isinstance(self.rate, Unset):
            rate = UNSET
        else:
            rate = self.rate

        secret: None | str | Unset
        if isinstance(self.secret, Unset):
            secret = UNSET
        else:
            secret = self.secret


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "url": url,
        })
        if application is not UNSET:
            field_dict["application"] = application
        if budget is not UNSET:
            field_dict["budget"] = budget
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
        if metrics is not UNSET:
            field_dict["metrics"] = metrics
        if previous_secret is not UNSET:
            field_dict["previous_secret"] = previous_secret
        if rate is not UNSET:
            field_dict["rate"] = rate
        if secret is not UNSET:
            field_dict["secret"] = secret

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.destination_put_filter_type_0 import DestinationPutFilterType0 # noqa: PLC0415
        d = dict(src_dict)
        url = d.pop("url")

        def _parse_application(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        application = _parse_application(d.pop("application", UNSET))


        def _parse_budget(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        budget = _parse_budget(d.pop("budget", UNSET))


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


        def _parse_filter_(data: object) -> DestinationPutFilterType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = DestinationPutFilterType0.from_dict(data)



                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DestinationPutFilterType0 | None | Unset, data)

        filter_ = _parse_filter_(d.pop("filter", UNSET))


        def _parse_metrics(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        metrics = _parse_metrics(d.pop("metrics", UNSET))


        def _parse_previous_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        previous_secret = _parse_previous_secret(d.pop("previous_secret", UNSET))


        def _parse_rate(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        rate = _parse_rate(d.pop("rate", UNSET))


        def _parse_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        secret = _parse_secret(d.pop("secret", UNSET))


        destination_put = cls(
            url=url,
            application=application,
            budget=budget,
            ceiling=ceiling,
            description=description,
            disabled=disabled,
            event_types=event_types,
            filter_=filter_,
            metrics=metrics,
            previous_secret=previous_secret,
            rate=rate,
            secret=secret,
        )

        return destination_put

