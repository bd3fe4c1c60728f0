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





T = TypeVar("T", bound="DestinationStatus")



@_attrs_define
class DestinationStatus:
    """ One destination now.

        Attributes:
            accepted (int): Webhooks admitted.
            adaptive (bool): Whether its rate follows its receiver's p99.
            breaker (str): `closed`, `open` or `half-open`.
            capacity (int): Webhooks it may queue (budget × rate).
            dead_lettered (int): Webhooks dead-lettered: redrive them with `POST
                /v1/dead-letters/redrive`.
            delivered (int): Webhooks delivered.
            depth (int): Webhooks queued (with `queue = redis`, the fleet's).
            in_flight (int): Deliveries running on this relay.
            name (str): Its name.
            rate (float): Its configured rate, webhooks/s.
            rate_now (float): The rate in force, webhooks/s (AIMD moves it when adaptive).
            refused (int): Webhooks refused.
            ceiling (float | None | Unset): The highest adaptive rate, when adaptive.
            floor (float | None | Unset): The lowest adaptive rate, when adaptive.
            last_error (LastError | None | Unset):
            p99_ms (float | None | Unset): This relay's deliveries' p99 over the last 10 to 20 s, ms; `null`
                without a recent delivery.
            target_p99_ms (float | None | Unset): The p99 the adaptive drain aims under, ms, when adaptive.
     """

    accepted: int
    adaptive: bool
    breaker: str
    capacity: int
    dead_lettered: int
    delivered: int
    depth: int
    in_flight: int
    name: str
    rate: float
    rate_now: float
    refused: int
    ceiling: float | None | Unset = UNSET
    floor: float | None | Unset = UNSET
    last_error: LastError | None | Unset = UNSET
    p99_ms: float | None | Unset = UNSET
    target_p99_ms: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.last_error import LastError # noqa: PLC0415
        accepted = self.accepted

        adaptive = self.adaptive

        breaker = self.breaker

        capacity = self.capacity

        dead_lettered = self.dead_lettered

        delivered = self.delivered

        depth = self.depth

        in_flight = self.in_flight

        name = self.name

        rate = self.rate

        rate_now = self.rate_now

        refused = self.refused

        ceiling: float | None | Unset
        if isinstance(self.ceiling, Unset):
            ceiling = UNSET
        else:
            ceiling = self.ceiling

        floor: float | None | Unset
        if isinstance(self.floor, Unset):
            floor = UNSET
        else:
            floor = self.floor

        last_error: dict[str, Any] | None | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        elif isinstance(self.last_error, LastError):
            last_error = self.last_error.to_dict()
        else:
            last_error = self.last_error

        p99_ms: float | None | Unset
        if isinstance(self.p99_ms, Unset):
            p99_ms = UNSET
        else:
            p99_ms = self.p99_ms

        target_p99_ms: float | None | Unset
        if isinstance(self.target_p99_ms, Unset):
            target_p99_ms = UNSET
        else:
            target_p99_ms = self.target_p99_ms


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "accepted": accepted,
            "adaptive": adaptive,
            "breaker": breaker,
            "capacity": capacity,
            "dead_lettered": dead_lettered,
            "delivered": delivered,
            "depth": depth,
            "in_flight": in_flight,
            "name": name,
            "rate": rate,
            "rate_now": rate_now,
            "refused": refused,
        })
        if ceiling is not UNSET:
            field_dict["ceiling"] = ceiling
        if floor is not UNSET:
            field_dict["floor"] = floor
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if p99_ms is not UNSET:
            field_dict["p99_ms"] = p99_ms
        if target_p99_ms is not UNSET:
            field_dict["target_p99_ms"] = target_p99_ms

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.last_error import LastError # noqa: PLC0415
        d = dict(src_dict)
        accepted = d.pop("accepted")

        adaptive = d.pop("adaptive")

        breaker = d.pop("breaker")

        capacity = d.pop("capacity")

        dead_lettered = d.pop("dead_lettered")

        delivered = d.pop("delivered")

        depth = d.pop("depth")

        in_flight = d.pop("in_flight")

        name = d.pop("name")

        rate = d.pop("rate")

        rate_now = d.pop("rate_now")

        refused = d.pop("refused")

        def _parse_ceiling(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        ceiling = _parse_ceiling(d.pop("ceiling", UNSET))


        def _parse_floor(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        floor = _parse_floor(d.pop("floor", UNSET))


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


        def _parse_p99_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        p99_ms = _parse_p99_ms(d.pop("p99_ms", UNSET))


        def _parse_target_p99_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        target_p99_ms = _parse_target_p99_ms(d.pop("target_p99_ms", UNSET))


        destination_status = cls(
            accepted=accepted,
            adaptive=adaptive,
            breaker=breaker,
            capacity=capacity,
            dead_lettered=dead_lettered,
            delivered=delivered,
            depth=depth,
            in_flight=in_flight,
            name=name,
            rate=rate,
            rate_now=rate_now,
            refused=refused,
            ceiling=ceiling,
            floor=floor,
            last_error=last_error,
            p99_ms=p99_ms,
            target_p99_ms=target_p99_ms,
        )


        destination_status.additional_properties = d
        return destination_status

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
