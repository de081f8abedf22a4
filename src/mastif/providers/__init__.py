"""Model endpoints: every model, local or remote, is reached as an OpenAI-compatible endpoint."""

from mastif.providers.endpoint import Endpoint, open_endpoint
from mastif.providers.gateway import Gateway

__all__ = ["Endpoint", "Gateway", "open_endpoint"]
