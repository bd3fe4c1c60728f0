from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="Live")



@_attrs_define
class Live:
    """ A destination's live state: with the local engine this relay's queue,
    with `queue = redis` the fleet's (its depth, bound and counts are every
    relay's together).

        Attributes:
            accepted (int): Webhooks admitted (an endpoint's event copies among them).
            active (bool): Whether its throttle runs now (with `queue = redis`: this relay's drain).
            breaker (str): `closed`, `open` or `half-open` (with `queue = redis`: `closed`).
            capacity (int): Webhooks it may queue (budget × rate), busy or idle.
            dead_lettered (int): Webhooks dead-lettered once admitted (evicted ones among them).
            delivered (int): Webhooks delivered.
            depth (int): Webhooks queued.
            held (int): Webhooks held: queued, waiting for a retry or in flight.
            in_flight (int): Deliveries running (on this relay).
            rate_now (float): Its drain rate now, webhooks/s; while idle, the rate it would start at.
            refused (int): Webhooks refused: their senders were answered 429 or 503. An
                endpoint's event copies its full queue refused are among them, each
                dead-lettered with reason `overflow` (in the dead letters, not in
                `dead_lettered`).
     """

    accepted: int
    active: bool
    breaker: str
    capacity: int
    dead_lettered: int
    delivered: int
    depth: int
    held: int
    in_flight: int
    rate_now: float
    refused: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        accepted = self.accepted

        active = self.active

        breaker = self.breaker

        capacity = self.capacity

        dead_lettered = self.dead_lettered

        delivered = self.delivered

        depth = self.depth

        held = self.held

        in_flight = self.in_flight

        rate_now = self.rate_now

        refused = self.refused


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "accepted": accepted,
            "active": active,
            "breaker": breaker,
            "capacity": capacity,
            "dead_lettered": dead_lettered,
            "delivered": delivered,
            "depth": depth,
            "held": held,
            "in_flight": in_flight,
            "rate_now": rate_now,
            "refused": refused,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        accepted = d.pop("accepted")

        active = d.pop("active")

        breaker = d.pop("breaker")

        capacity = d.pop("capacity")

        dead_lettered = d.pop("dead_lettered")

        delivered = d.pop("delivered")

        depth = d.pop("depth")

        held = d.pop("held")

        in_flight = d.pop("in_flight")

        rate_now = d.pop("rate_now")

        refused = d.pop("refused")

        live = cls(
            accepted=accepted,
            active=active,
            breaker=breaker,
            capacity=capacity,
            dead_lettered=dead_lettered,
            delivered=delivered,
            depth=depth,
            held=held,
            in_flight=in_flight,
            rate_now=rate_now,
            refused=refused,
        )


        live.additional_properties = d
        return live

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
