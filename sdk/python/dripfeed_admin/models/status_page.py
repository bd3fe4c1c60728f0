from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.destination_status import DestinationStatus
  from ..models.down import Down





T = TypeVar("T", bound="StatusPage")



@_attrs_define
class StatusPage:
    """ The relay now.

        Attributes:
            destinations (list[DestinationStatus]): The destinations shown.
            down (list[Down]): What is down when not ready: `journal`, `dead-letter`, `redis`,
                `redis_durability`, `postgres`, each with why.
            held (int): The destinations the relay holds.
            queue (str): `local` (this relay's queue and journal) or `redis` (the fleet's
                queue: depths, bounds and counts are the fleet's).
            ready (bool): Whether a webhook taken now can be kept (`/readyz`).
            shown (str): Which are shown: `all` (every one, in configuration order, when
                there are at most 50), `busiest` (50: those holding the most
                webhooks, most first, then the first in configuration order) or
                `found` (those whose names contain `find`, at most 50).
     """

    destinations: list[DestinationStatus]
    down: list[Down]
    held: int
    queue: str
    ready: bool
    shown: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.destination_status import DestinationStatus # noqa: PLC0415
        from ..models.down import Down # noqa: PLC0415
        destinations = []
        for destinations_item_data in self.destinations:
            destinations_item = destinations_item_data.to_dict()
            destinations.append(destinations_item)



        down = []
        for down_item_data in self.down:
            down_item = down_item_data.to_dict()
            down.append(down_item)



        held = self.held

        queue = self.queue

        ready = self.ready

        shown = self.shown


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "destinations": destinations,
            "down": down,
            "held": held,
            "queue": queue,
            "ready": ready,
            "shown": shown,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.destination_status import DestinationStatus # noqa: PLC0415
        from ..models.down import Down # noqa: PLC0415
        d = dict(src_dict)
        destinations = []
        _destinations = d.pop("destinations")
        for destinations_item_data in (_destinations):
            destinations_item = DestinationStatus.from_dict(destinations_item_data)



            destinations.append(destinations_item)


        down = []
        _down = d.pop("down")
        for down_item_data in (_down):
            down_item = Down.from_dict(down_item_data)



            down.append(down_item)


        held = d.pop("held")

        queue = d.pop("queue")

        ready = d.pop("ready")

        shown = d.pop("shown")

        status_page = cls(
            destinations=destinations,
            down=down,
            held=held,
            queue=queue,
            ready=ready,
            shown=shown,
        )


        status_page.additional_properties = d
        return status_page

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
