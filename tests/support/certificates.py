"""A test CA and the certificates it signs (by the openssl command): the broker's, for
127.0.0.1 and localhost, and clients' with a role as their common name."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Authority", "make_authority"]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@dataclass
class Authority:
    """A CA in ``directory``: ``ca_file`` (its certificate) signs with ``key_file``."""

    directory: Path
    ca_file: Path
    key_file: Path

    def issue(self, name: str, common_name: str, *, server: bool = False) -> tuple[Path, Path]:
        """A certificate (and its key) for ``common_name``, signed by this CA; a server's
        names 127.0.0.1 and localhost."""
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        request, extensions = self.directory / f"{name}.csr", self.directory / f"{name}.ext"
        extensions.write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
            if server else "extendedKeyUsage=clientAuth\n")
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", str(key), "-out", str(request), "-subj", f"/CN={common_name}")
        _openssl("x509", "-req", "-in", str(request), "-CA", str(self.ca_file),
                 "-CAkey", str(self.key_file), "-CAcreateserial", "-days", "2",
                 "-extfile", str(extensions), "-out", str(cert))
        return cert, key


def make_authority(directory: Path, name: str = "ca") -> Authority | None:
    """A new CA in ``directory``, or None without the openssl command."""
    if shutil.which("openssl") is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    ca, key = directory / f"{name}.pem", directory / f"{name}.key"
    # Python 3.13 verifies strictly (VERIFY_X509_STRICT): a CA must say it is one and may sign.
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", str(key), "-out", str(ca), "-days", "2",
             "-subj", f"/CN=protoframe test {name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return Authority(directory, ca, key)
