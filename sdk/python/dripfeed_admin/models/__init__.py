""" Contains all the data models used in inputs/outputs """

from .application_deleted import ApplicationDeleted
from .application_list import ApplicationList
from .application_put import ApplicationPut
from .application_view import ApplicationView
from .attempt_list import AttemptList
from .attempt_view import AttemptView
from .copy_view import CopyView
from .dead_letter import DeadLetter
from .dead_letter_page import DeadLetterPage
from .deleting import Deleting
from .destination_list import DestinationList
from .destination_patch import DestinationPatch
from .destination_patch_filter_type_0 import DestinationPatchFilterType0
from .destination_put import DestinationPut
from .destination_put_filter_type_0 import DestinationPutFilterType0
from .destination_status import DestinationStatus
from .destination_view import DestinationView
from .destination_view_filter_type_0 import DestinationViewFilterType0
from .document_response_200 import DocumentResponse200
from .down import Down
from .endpoint_copy import EndpointCopy
from .endpoint_list import EndpointList
from .event_list import EventList
from .event_view import EventView
from .kept import Kept
from .last_error import LastError
from .live import Live
from .not_ready import NotReady
from .problem import Problem
from .ready import Ready
from .recover import Recover
from .redrive_destination import RedriveDestination
from .redrive_ids import RedriveIds
from .redrive_result import RedriveResult
from .resend import Resend
from .sent_again import SentAgain
from .state import State
from .status_page import StatusPage
from .webhook_status import WebhookStatus

__all__ = (
    "ApplicationDeleted",
    "ApplicationList",
    "ApplicationPut",
    "ApplicationView",
    "AttemptList",
    "AttemptView",
    "CopyView",
    "DeadLetter",
    "DeadLetterPage",
    "Deleting",
    "DestinationList",
    "DestinationPatch",
    "DestinationPatchFilterType0",
    "DestinationPut",
    "DestinationPutFilterType0",
    "DestinationStatus",
    "DestinationView",
    "DestinationViewFilterType0",
    "DocumentResponse200",
    "Down",
    "EndpointCopy",
    "EndpointList",
    "EventList",
    "EventView",
    "Kept",
    "LastError",
    "Live",
    "NotReady",
    "Problem",
    "Ready",
    "Recover",
    "RedriveDestination",
    "RedriveIds",
    "RedriveResult",
    "Resend",
    "SentAgain",
    "State",
    "StatusPage",
    "WebhookStatus",
)
