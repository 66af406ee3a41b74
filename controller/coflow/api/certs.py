"""Test and lab certificates (the ``cryptography`` package): a CA and certificates it signs,
for the coflow API's TLS and the P4Runtime channels' (BMv2's ``--grpc-server-ssl``).

    ca = make_ca("coflow test CA")
    srv = issue(ca, "coflow-api", sans=("127.0.0.1", "localhost"))
    cli = issue(ca, "controller", client=True)
    write(ca, srv, "/tmp/tls", "api")   # api.crt, api.key, ca.crt

Keys are EC P-256; certificates are valid from one hour ago for ``days`` days. For production,
issue certificates with your own PKI; nothing here is needed at run time.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pem:
    cert: bytes
    key: bytes
    _obj: Any = None        # (certificate, private key) objects, to sign with (a CA)


def _name(cn: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem(cert, key) -> Pem:
    from cryptography.hazmat.primitives import serialization as ser
    return Pem(cert.public_bytes(ser.Encoding.PEM),
               key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()),
               (cert, key))


def make_ca(cn: str = "coflow CA", days: int = 30) -> Pem:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return _pem(cert, key)


def issue(ca: Pem, cn: str, sans=("127.0.0.1", "localhost"), client: bool = False,
          days: int = 30) -> Pem:
    """A certificate for ``cn`` signed by ``ca``: a server's (SANs: IP addresses or DNS names)
    or, with ``client``, a client's (for mutual TLS)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID
    ca_cert, ca_key = ca._obj
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    alt: list = []
    for s in sans:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(s)))
        except ValueError:
            alt.append(x509.DNSName(s))
    b = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(hours=1))
         .not_valid_after(now + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                               else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    if alt:
        b = b.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return _pem(b.sign(ca_key, hashes.SHA256()), key)


def write(ca: Pem, leaf: Pem, directory: str, name: str) -> dict:
    """``<name>.crt``, ``<name>.key`` (mode 0600) and ``ca.crt`` in ``directory``; their paths."""
    os.makedirs(directory, exist_ok=True)
    out = {"ca": os.path.join(directory, "ca.crt"), "cert": os.path.join(directory, f"{name}.crt"),
           "key": os.path.join(directory, f"{name}.key")}
    with open(out["ca"], "wb") as f:
        f.write(ca.cert)
    with open(out["cert"], "wb") as f:
        f.write(leaf.cert)
    fd = os.open(out["key"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(leaf.key)
    return out
