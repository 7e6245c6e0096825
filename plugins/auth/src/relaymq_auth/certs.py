"""Distinguished names of TLS client certificates, compared as ActiveMQ users write them.

ActiveMQ's ``TextFileCertificateLoginModule`` maps a user name to the subject DN
Java prints (RFC 2253: ``CN=client,O=Example,C=US``, most specific first).
Python's ``getpeercert()`` gives the subject as RDN tuples in certificate order
with OpenSSL's long names. `subject_dn` renders the RFC 2253 form; `dn_key`
normalises either spelling (RFC 2253, ``openssl x509 -subject``'s ``C = US, O = ...``
or ``/C=US/O=...``) to one comparable key, so the order and spacing a user
happens to copy do not matter.
"""

from __future__ import annotations

import re

_SHORT = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
    "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "emailAddress": "EMAILADDRESS", "domainComponent": "DC", "streetAddress": "STREET",
    "userId": "UID", "serialNumber": "SERIALNUMBER", "title": "T", "givenName": "GIVENNAME",
    "surname": "SURNAME",
}
_ALIASES = {"E": "EMAILADDRESS", "S": "ST", "SN": "SERIALNUMBER"}
_SPLIT = re.compile(r"(?<!\\)[,+;]")


def subject_dn(peercert: object) -> str | None:
    """RFC 2253 subject of a ``getpeercert()`` dict (None when there is none)."""
    if not isinstance(peercert, dict):
        return None
    subject = peercert.get("subject")
    if not subject:
        return None
    parts: list[str] = []
    for rdn in reversed(subject):
        for name, value in rdn:
            attr = _SHORT.get(name, name)
            escaped = re.sub(r'([,+"\\<>;=])', r"\\\1", str(value))
            parts.append(f"{attr}={escaped}")
    return ",".join(parts)


def dn_key(dn: str) -> tuple[tuple[str, str], ...]:
    """A normalised, order-independent key for a DN written in any common form."""
    text = dn.strip()
    if text.startswith("/"):
        pieces = [p for p in text.split("/") if p]
    else:
        pieces = _SPLIT.split(text)
    out: list[tuple[str, str]] = []
    for piece in pieces:
        if "=" not in piece:
            continue
        attr, value = piece.split("=", 1)
        attr = attr.strip().upper()
        attr = _ALIASES.get(attr, _SHORT.get(attr.strip(), attr))
        value = re.sub(r"\\(.)", r"\1", value.strip())
        out.append((attr.upper(), value))
    return tuple(sorted(out))
