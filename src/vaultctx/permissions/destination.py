"""Where a note's text goes: to a person reading an answer, to a model on this machine, or
to a model elsewhere. A read rule can name destinations, so a folder may reach local models
only, or no model at all, and still be found in search.

The decision is made from the model string and its endpoint alone (litellm's form); an
endpoint that cannot be shown to be on this machine is remote.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from enum import StrEnum
from urllib.parse import urlsplit


class Destination(StrEnum):
    CLIENT = "client"  # a person reading an answer: the CLI, HTTP, the plugin
    LOCAL_MODEL = "local_model"  # a model whose endpoint is on this machine
    REMOTE_MODEL = "remote_model"  # any other model


MODEL_DESTINATIONS = (Destination.LOCAL_MODEL, Destination.REMOTE_MODEL)
"""What a rule's `destinations = ["model"]` stands for."""

# litellm providers that run on this machine when no api_base is given, and the environment
# variable through which litellm would send them elsewhere.
LOCAL_PROVIDERS: dict[str, tuple[str, ...]] = {
    "ollama": ("OLLAMA_API_BASE",),
    "ollama_chat": ("OLLAMA_API_BASE",),
    "llamafile": ("LLAMAFILE_API_BASE",),
    "lm_studio": ("LM_STUDIO_API_BASE",),
}


def is_loopback(api_base: str) -> bool:
    """Whether an endpoint URL's host is this machine: localhost, 127.0.0.0/8 or ::1."""
    url = api_base.strip()
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname
    except ValueError:  # not a URL (an unclosed IPv6 bracket, a bad port): not known local
        return False
    if not host:
        return False
    if host.rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def destination_of(
    model: str, api_base: str | None, *, environ: Mapping[str, str] | None = None
) -> Destination:
    """The destination of a request to `model` (litellm's `provider/name`) at `api_base`.

    Local: an `api_base` on a loopback host, or a provider that runs locally by default
    (`ollama/…`) with no `api_base` and no environment variable sending it elsewhere.
    Anything else is remote. `environ` (default `os.environ`) is read only for those
    providers' variables."""
    if api_base:
        return Destination.LOCAL_MODEL if is_loopback(api_base) else Destination.REMOTE_MODEL
    provider = model.partition("/")[0].strip().lower() if "/" in model else ""
    variables = LOCAL_PROVIDERS.get(provider)
    if variables is None:
        return Destination.REMOTE_MODEL
    env = os.environ if environ is None else environ
    elsewhere = [env[name] for name in variables if env.get(name)]
    if any(not is_loopback(base) for base in elsewhere):
        return Destination.REMOTE_MODEL
    return Destination.LOCAL_MODEL
