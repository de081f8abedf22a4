"""Model endpoints: every model, local or remote, is reached as an OpenAI-compatible endpoint.

Owns an endpoint and how to open one from a model spec (``endpoint.py``); the gateway every
model call goes through (``gateway.py``) and its side towards the endpoint: retries and the
adaptive limit (``upstream.py``); a bundled model behind a local llama.cpp server
(``local.py``; the server's entry point ``xllamacpp_server.py``), another quantisation of it
(``requantise.py``) and tool calls by a forced first choice (``forced_choice.py``); the
scripted model for smoke tests (``scripted.py``); the opt-in response cache (``cache.py``).

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks.
"""

from mastif.providers.endpoint import Endpoint, open_endpoint
from mastif.providers.gateway import Gateway

__all__ = ["Endpoint", "Gateway", "open_endpoint"]
