from enum import StrEnum

class State(StrEnum):
    DEAD_LETTERED = "dead_lettered"
    DELIVERED = "delivered"
    IN_FLIGHT = "in_flight"
    QUEUED = "queued"
    RETRY_WAITING = "retry_waiting"

    def __str__(self) -> str:
        return str(self.value)
