""" Contains all the data models used in inputs/outputs """

from .accepted import Accepted
from .document_response_200 import DocumentResponse200
from .event_accepted import EventAccepted
from .event_in import EventIn
from .problem import Problem
from .state import State
from .webhook_status import WebhookStatus

__all__ = (
    "Accepted",
    "DocumentResponse200",
    "EventAccepted",
    "EventIn",
    "Problem",
    "State",
    "WebhookStatus",
)
