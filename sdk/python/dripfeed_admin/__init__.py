
""" A client library for accessing dripfeed-relay admin """
from .client import AuthenticatedClient, Client

__all__ = (
    "AuthenticatedClient",
    "Client",
)
