
""" A client library for accessing dripfeed-relay intake """
from .client import AuthenticatedClient, Client

__all__ = (
    "AuthenticatedClient",
    "Client",
)
