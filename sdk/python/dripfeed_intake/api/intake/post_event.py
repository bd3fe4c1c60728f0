from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.event_accepted import EventAccepted
from ...models.event_in import EventIn
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    app: str,
    *,
    body: EventIn,
    idempotency_key: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key



    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/applications/{app}/events".format(app=quote(str(app), safe=""),),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> EventAccepted | Problem | None:
    if response.status_code == 202:
        response_202 = EventAccepted.from_dict(response.json())



        return response_202

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())



        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())



        return response_404

    if response.status_code == 408:
        response_408 = Problem.from_dict(response.json())



        return response_408

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())



        return response_413

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())



        return response_422

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())



        return response_429

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())



        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[EventAccepted | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    app: str,
    *,
    client: AuthenticatedClient,
    body: EventIn,
    idempotency_key: str | Unset = UNSET,

) -> Response[EventAccepted | Problem]:
    """ `POST /v1/applications/{app}/events`.

    Args:
        app (str):
        idempotency_key (str | Unset):
        body (EventIn): An event as posted.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EventAccepted | Problem]
     """


    kwargs = _get_kwargs(
        app=app,
body=body,
idempotency_key=idempotency_key,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    app: str,
    *,
    client: AuthenticatedClient,
    body: EventIn,
    idempotency_key: str | Unset = UNSET,

) -> EventAccepted | Problem | None:
    """ `POST /v1/applications/{app}/events`.

    Args:
        app (str):
        idempotency_key (str | Unset):
        body (EventIn): An event as posted.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EventAccepted | Problem
     """


    return sync_detailed(
        app=app,
client=client,
body=body,
idempotency_key=idempotency_key,

    ).parsed

async def asyncio_detailed(
    app: str,
    *,
    client: AuthenticatedClient,
    body: EventIn,
    idempotency_key: str | Unset = UNSET,

) -> Response[EventAccepted | Problem]:
    """ `POST /v1/applications/{app}/events`.

    Args:
        app (str):
        idempotency_key (str | Unset):
        body (EventIn): An event as posted.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EventAccepted | Problem]
     """


    kwargs = _get_kwargs(
        app=app,
body=body,
idempotency_key=idempotency_key,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    app: str,
    *,
    client: AuthenticatedClient,
    body: EventIn,
    idempotency_key: str | Unset = UNSET,

) -> EventAccepted | Problem | None:
    """ `POST /v1/applications/{app}/events`.

    Args:
        app (str):
        idempotency_key (str | Unset):
        body (EventIn): An event as posted.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EventAccepted | Problem
     """


    return (await asyncio_detailed(
        app=app,
client=client,
body=body,
idempotency_key=idempotency_key,

    )).parsed
