"""A small OAuth 2.0 authorization server for the tests: the client-credentials grant only,
on 127.0.0.1 in a thread of its own (the client may fetch tokens from any thread).

It answers ``/.well-known/openid-configuration`` with its token endpoint, and a POST there with
valid client credentials with a JWT for ``role`` that expires in ``lifetime`` seconds, signed by
``sign`` (so that the broker under test accepts it). Every token request is kept in
``requests`` (its form fields), every token issued in ``issued``.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["TokenServer"]

TOKEN_PATH = "/oauth/token"


class TokenServer:
    def __init__(self, sign: Callable[[dict[str, Any]], str], *, role: str,
                 client_id: str = "test-client", client_secret: str = "test-secret",
                 lifetime: float = 3600, audience: str | None = None) -> None:
        self.sign = sign
        self.role = role
        self.client_id = client_id
        self.client_secret = client_secret
        self.lifetime = lifetime
        self.audience = audience
        self.requests: list[dict[str, str]] = []
        self.issued: list[tuple[str, int]] = []  # (token, its exp)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def issuer_url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, document: dict[str, Any]) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    self._answer(200, {"issuer": owner.issuer_url,
                                       "token_endpoint": owner.issuer_url + TOKEN_PATH})
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                if self.headers.get("Content-Type", "").startswith("application/json"):
                    form = {k: str(v) for k, v in json.loads(raw).items()}
                else:
                    form = dict(urllib.parse.parse_qsl(raw))
                with owner._lock:
                    owner.requests.append(form)
                if self.path != TOKEN_PATH:
                    self._answer(404, {"error": "not_found"})
                elif form.get("grant_type") != "client_credentials":
                    self._answer(400, {"error": "unsupported_grant_type"})
                elif (form.get("client_id"), form.get("client_secret")) != (
                        owner.client_id, owner.client_secret):
                    self._answer(401, {"error": "invalid_client"})
                elif owner.audience is not None and form.get("audience") != owner.audience:
                    self._answer(400, {"error": "invalid_request", "error_description":
                                       f"audience {form.get('audience')!r}"})
                else:
                    expires = int(time.time() + owner.lifetime)
                    token = owner.sign({"sub": owner.role, "exp": expires})
                    with owner._lock:
                        owner.issued.append((token, expires))
                    self._answer(200, {"access_token": token, "token_type": "Bearer",
                                       "expires_in": owner.lifetime})

        return Handler

    def start(self) -> str:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="token-server", daemon=True)
        self._thread.start()
        return self.issuer_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)
        self._server = self._thread = None

    def __enter__(self) -> TokenServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
