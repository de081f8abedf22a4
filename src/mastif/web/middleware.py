"""The sandbox's ASGI middleware: a session per cookie, and a cap on request bodies.

:class:`SessionMiddleware` gives every request a sandbox session (its id in the
``mastif_session`` cookie, read back with :func:`session_of`); :class:`BodyLimitMiddleware`
answers 413 to an oversized body before the sites' form parsing buffers it.
"""

from __future__ import annotations

from starlette.requests import Request, cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mastif.web.store import SessionStore, is_valid_session_id

SESSION_COOKIE = "mastif_session"
SESSION_SCOPE_KEY = "mastif.session"
"""Where :class:`SessionMiddleware` puts the request's session id in the ASGI scope."""


class SessionMiddleware:
    """Give every request a sandbox session, from the cookie or freshly made.

    A valid ``mastif_session`` cookie selects that session (registering it if the id is
    new, so a runner may choose ids itself); a request without one, or with a malformed
    one, gets a new random session and a ``Set-Cookie`` on its response.
    """

    def __init__(self, app: ASGIApp, store: SessionStore) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_cookie = ""
        for name, value in scope.get("headers", []):
            if name == b"cookie":
                raw_cookie = value.decode("latin-1")
                break
        sid = cookie_parser(raw_cookie).get(SESSION_COOKIE, "") if raw_cookie else ""
        fresh = not is_valid_session_id(sid)
        if fresh:
            sid = self.store.new_session()
        else:
            self.store.ensure(sid)
        scope[SESSION_SCOPE_KEY] = sid

        async def send_with_cookie(message: Message) -> None:
            if fresh and message["type"] == "http.response.start":
                cookie = f"{SESSION_COOKIE}={sid}; Path=/; HttpOnly; SameSite=Lax"
                headers = [*message.get("headers", []), (b"set-cookie", cookie.encode("latin-1"))]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookie)


#: Largest request body the sandbox reads (bytes); its forms are a few hundred bytes.
MAX_BODY_BYTES = 64 * 1024


class _BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Answer 413 to a request whose body exceeds ``max_bytes``, without reading it whole.

    A declared ``Content-Length`` above the limit is refused before any byte is read; a
    chunked or understated body is counted as it streams and refused at the first chunk
    that crosses the limit (Starlette's ``request.form()`` would otherwise buffer it all).
    """

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _too_large(self, send: Send) -> None:
        body = f"request body larger than {self.max_bytes} bytes".encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await self._too_large(send)
                    return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if started:
                raise
            await self._too_large(send)


def session_of(request: Request) -> str:
    return str(request.scope[SESSION_SCOPE_KEY])
