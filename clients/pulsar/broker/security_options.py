"""The broker command's TLS, authentication and authorization options (named as Pulsar's
``broker.conf`` settings) and the ``Security`` and listener arguments they make."""

from __future__ import annotations

import argparse
from typing import Any

from .security import Security, parse_grant

__all__ = ["add_security_options", "security_of", "tls_arguments_of"]


def add_security_options(parser: argparse.ArgumentParser) -> None:
    tls = parser.add_argument_group("TLS", "a second listener, for pulsar+ssl:// clients")
    tls.add_argument("--tls-port", type=int, metavar="PORT",
                     help="listen with TLS on this port too (0 picks a free one; Pulsar's "
                     "brokerServicePortTls)")
    tls.add_argument("--tls-certificate-file", metavar="PEM",
                     help="the broker's certificate (tlsCertificateFilePath)")
    tls.add_argument("--tls-key-file", metavar="PEM",
                     help="its private key (tlsKeyFilePath)")
    tls.add_argument("--tls-trust-certs-file", metavar="PEM",
                     help="CA certificates client certificates are verified with "
                     "(tlsTrustCertsFilePath)")
    auth = parser.add_argument_group("authentication and authorization")
    auth.add_argument("--authentication-enabled", action="store_true",
                      help="refuse clients that prove no role (authenticationEnabled)")
    auth.add_argument("--token-secret-key", metavar="KEY",
                      help="accept JWTs signed with this secret (HS256/384/512): "
                      "data:;base64,<key> or file:///path (tokenSecretKey)")
    auth.add_argument("--token-public-key", metavar="KEY",
                      help="accept JWTs signed with the private half of this public key "
                      "(RS*/PS*/ES*), PEM or DER: data:;base64,<key> or file:///path "
                      "(tokenPublicKey)")
    auth.add_argument("--token-auth-claim", default="sub", metavar="CLAIM",
                      help="the token claim naming the role (default %(default)s)")
    auth.add_argument("--tls-authentication", action="store_true",
                      help="accept a trusted client certificate, its common name the role "
                      "(AuthenticationProviderTls)")
    auth.add_argument("--anonymous-role", metavar="ROLE",
                      help="the role of clients that send no credentials (anonymousUserRole)")
    auth.add_argument("--authorization-enabled", action="store_true",
                      help="check each producer and consumer against the grants "
                      "(authorizationEnabled)")
    auth.add_argument("--superuser-role", action="append", default=[], metavar="ROLE",
                      help="a role allowed everything (superUserRoles; repeatable)")
    auth.add_argument("--grant", action="append", default=[],
                      metavar="NAMESPACE:ROLE:ACTIONS",
                      help="allow ROLE (or * for any) ACTIONS (produce,consume) on the "
                      "namespace tenant/namespace (repeatable; as pulsar-admin namespaces "
                      "grant-permission)")
    auth.add_argument("--auth-refresh-grace-seconds", type=float, default=60.0,
                      metavar="SECONDS",
                      help="how long a client whose token expired has to send a new one "
                      "(default %(default)s)")


def security_of(args: argparse.Namespace) -> Security | None:
    """The ``Security`` the options ask for (None when they ask for none); exits with a
    message when they make no sense."""
    if not (args.authentication_enabled or args.authorization_enabled):
        return None
    grants: dict[str, dict[str, set[str]]] = {}
    try:
        for text in args.grant:
            namespace, role, actions = parse_grant(text)
            grants.setdefault(namespace, {}).setdefault(role, set()).update(actions)
        return Security(
            authentication_enabled=args.authentication_enabled,
            token_secret_key=args.token_secret_key, token_public_key=args.token_public_key,
            token_auth_claim=args.token_auth_claim, tls_authentication=args.tls_authentication,
            anonymous_role=args.anonymous_role,
            authorization_enabled=args.authorization_enabled,
            superuser_roles=args.superuser_role, grants=grants,
            auth_refresh_grace_seconds=args.auth_refresh_grace_seconds)
    except (ValueError, OSError) as exc:
        raise SystemExit(f"broker: {exc}") from None


def tls_arguments_of(args: argparse.Namespace) -> dict[str, Any]:
    """``EmbeddedBroker``'s TLS keyword arguments from the options."""
    if args.tls_port is None:
        return {}
    if args.tls_certificate_file is None or args.tls_key_file is None:
        raise SystemExit("broker: --tls-port needs --tls-certificate-file and --tls-key-file")
    return {"tls_port": args.tls_port, "tls_certificate_file_path": args.tls_certificate_file,
            "tls_key_file_path": args.tls_key_file,
            "tls_trust_certs_file_path": args.tls_trust_certs_file}
