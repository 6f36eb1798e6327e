"""TLS for client connections: the context ``Connection.connect`` is given."""

from __future__ import annotations

import ssl

__all__ = ["make_ssl_context"]


def make_ssl_context(
    ca_file: str | None = None,
    *,
    verify: bool = True,
    check_hostname: bool = True,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> ssl.SSLContext:
    """A client TLS context trusting ``ca_file`` (or the system store when None).

    ``verify=False`` accepts any certificate (for tests and insecure setups only);
    ``cert_file``/``key_file`` add a client certificate.
    """
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context.check_hostname = check_hostname
    if cert_file is not None:
        context.load_cert_chain(cert_file, key_file)
    return context
