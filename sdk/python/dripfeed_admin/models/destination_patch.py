from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.destination_patch_filter_type_0 import DestinationPatchFilterType0





T = TypeVar("T", bound="DestinationPatch")



@_attrs_define
class DestinationPatch:
    """ A JSON merge patch (RFC 7396) of a destination: each field given
    replaces its value, `null` removes it (back to the setting; for a
    secret, no signing); a field left out stays as it is.

        Attributes:
            application (str | Unset): The application whose endpoint it is; it cannot be changed (delete
                the endpoint and make it under the other application).
            budget (None | str | Unset): Its latency budget, e.g. `"2s"`. Example: 2s.
            ceiling (float | None | Unset): Its highest rate, webhooks/s.
            description (None | str | Unset): What it is; `null`: none.
            disabled (bool | None | Unset): Disabled: it takes no new event; `null`: enabled.
            event_types (list[str] | None | Unset): The event types it takes; `null`: every type.
            filter_ (DestinationPatchFilterType0 | None | Unset): Equality on the payload's fields; `null`: no filter.
            metrics (bool | None | Unset): Whether it has its own metric series; `null`: as its origin decides.
            previous_secret (None | str | Unset): The secret being replaced; `null`: the change of secret is over.
            rate (float | None | Unset): Its drain rate, webhooks/s.
            secret (None | str | Unset): Its signing secret, `whsec_` + base64; `null`: no signing.
            url (str | Unset): Where its webhooks are POSTed: a string (it cannot be removed:
                `null` is refused). Example: https://billing.example.com/hooks.
     """

    application: str | Unset = UNSET
    budget: None | str | Unset = UNSET
    ceiling: float | None | Unset = UNSET
    description: None | str | Unset = UNSET
    disabled: bool | None | Unset = UNSET
    event_types: list[str] | None | Unset = UNSET
    filter_: DestinationPatchFilterType0 | None | Unset = UNSET
    metrics: bool | None | Unset = UNSET
    previous_secret: None | str | Unset = UNSET
    rate: float | None | Unset = UNSET
    secret: None | str | Unset = UNSET
    url: str | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        from ..models.destination_patch_filter_type_0 import DestinationPatchFilterType0 # noqa: PLC0415
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
        elif isinstance(self.filter_, DestinationPatchFilterType0):
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

        url = self.url


        field_dict: dict[str, Any] = {}

        field_dict.update({
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
        if url is not UNSET:
            field_dict["url"] = url

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.destination_patch_filter_type_0 import DestinationPatchFilterType0 # noqa: PLC0415
        d = dict(src_dict)
        application = d.pop("application", UNSET)

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


        def _parse_filter_(data: object) -> DestinationPatchFilterType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = DestinationPatchFilterType0.from_dict(data)



                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DestinationPatchFilterType0 | None | Unset, data)

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


        url = d.pop("url", UNSET)

        destination_patch = cls(
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
            url=url,
        )

        return destination_patch

