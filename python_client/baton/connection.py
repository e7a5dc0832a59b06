"""How a client reaches a Baton scheduler: the channel (plain, or TLS when the server was started with
--tls-cert) and the API key every call but Health must carry when the server was started with
--api-key. Both clients (baton.Client, baton.aio.AsyncClient) use these."""

from __future__ import annotations

import os

import grpc

API_KEY_ENV = "BATON_API_KEY"


def call_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata that presents the API key, as OpenAI clients do over HTTP: "authorization: Bearer
    KEY". api_key None: $BATON_API_KEY, or no key."""
    key = os.environ.get(API_KEY_ENV) if api_key is None else api_key
    return (("authorization", f"Bearer {key}"),) if key else ()


def channel_credentials(tls: bool, root_certificates: bytes | None) -> grpc.ChannelCredentials | None:
    """TLS credentials trusting root_certificates (PEM; None: the system's roots), or None for a
    plain-text channel."""
    if not tls and root_certificates is None:
        return None
    return grpc.ssl_channel_credentials(root_certificates=root_certificates)
