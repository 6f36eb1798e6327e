"""Credentials a client presents when it connects: the plug-in interface and "none"."""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["Authentication", "NoAuthentication"]


class Authentication(ABC):
    """A credential plug-in: a method name and the bytes that prove the identity.

    ``auth_data`` is asked for on every (re)connect, so a plug-in may hand out fresh
    credentials each time; ``challenge`` answers a server's (re)authentication challenge.
    Clients await ``prepare`` before either, so that a plug-in which fetches credentials over
    the network (OAuth2) does it there, without blocking the event loop.
    """

    async def prepare(self, challenge: bytes | None = None) -> None:
        """Make sure ``auth_data`` (or, with the server's ``challenge``, ``challenge``) can
        answer at once; by default there is nothing to do."""
        return None

    @property
    @abstractmethod
    def method_name(self) -> str:
        """The name the server knows this method by (``"token"``, ``"none"``, ...)."""

    @abstractmethod
    def auth_data(self) -> bytes:
        """The credentials to send when connecting."""

    def challenge(self, data: bytes) -> bytes:
        """Answer a challenge from the server; by default, send the credentials again."""
        return self.auth_data()


class NoAuthentication(Authentication):
    """No credentials."""

    @property
    def method_name(self) -> str:
        return "none"

    def auth_data(self) -> bytes:
        return b""
