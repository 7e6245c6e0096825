"""``ENC(...)`` values as ActiveMQ makes them (``activemq encrypt``, Jasypt).

ActiveMQ encrypts configuration passwords with Jasypt's ``StandardPBEStringEncryptor``
keyed by the ``ACTIVEMQ_ENCRYPTION_PASSWORD`` environment variable. Two algorithms
are read and written here, byte-compatible with Jasypt's defaults:

* ``PBEWithMD5AndDES`` (ActiveMQ's default): base64 of 8 bytes of salt + DES-CBC
  ciphertext; key and IV are the two halves of MD5 iterated 1000 times over
  password + salt (PKCS #5 v1.5, PBES1).
* ``PBEWITHHMACSHA256ANDAES_256`` (``activemq encrypt --algorithm ...``): base64 of
  16 bytes of salt + 16 bytes of IV + AES-256-CBC ciphertext; the key is
  PBKDF2-HMAC-SHA256 over the password, 1000 iterations (PBES2).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os

from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

DES = "PBEWithMD5AndDES"
AES = "PBEWITHHMACSHA256ANDAES_256"
ALGORITHMS = (DES, AES)
ITERATIONS = 1000


class EncryptionError(ValueError):
    """An ENC(...) value that cannot be decrypted with the key and algorithm given."""


def algorithm_named(name: str) -> str:
    for known in ALGORITHMS:
        if known.upper() == name.strip().upper():
            return known
    raise EncryptionError(f"unknown encryption algorithm {name!r}; known: {', '.join(ALGORITHMS)}")


def _des_key_iv(password: str, salt: bytes) -> tuple[bytes, bytes]:
    digest = password.encode("utf-8") + salt
    for _ in range(ITERATIONS):
        digest = hashlib.md5(digest).digest()  # noqa: S324 - the algorithm ActiveMQ uses
    key = digest[:8]
    return key * 3, digest[8:16]  # three equal DES keys: 3DES-EDE is single DES


def _aes_key(password: str, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, ITERATIONS, 32)


def encrypt(plain: str, password: str, algorithm: str = DES) -> str:
    """The base64 text ActiveMQ's ``activemq encrypt`` prints (without ``ENC()``)."""
    algorithm = algorithm_named(algorithm)
    data = plain.encode("utf-8")
    if algorithm == DES:
        salt = os.urandom(8)
        key, iv = _des_key_iv(password, salt)
        padder = padding.PKCS7(64).padder()
        enc = Cipher(TripleDES(key), modes.CBC(iv)).encryptor()
        body = enc.update(padder.update(data) + padder.finalize()) + enc.finalize()
        return base64.b64encode(salt + body).decode("ascii")
    salt, iv = os.urandom(16), os.urandom(16)
    padder = padding.PKCS7(128).padder()
    enc = Cipher(algorithms.AES(_aes_key(password, salt)), modes.CBC(iv)).encryptor()
    body = enc.update(padder.update(data) + padder.finalize()) + enc.finalize()
    return base64.b64encode(salt + iv + body).decode("ascii")


def decrypt(text: str, password: str, algorithm: str = DES) -> str:
    """Decrypt the inside of ``ENC(...)``.

    :raises EncryptionError: not base64, the wrong key, or the wrong algorithm.
    """
    algorithm = algorithm_named(algorithm)
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise EncryptionError("the value is not base64") from None
    try:
        if algorithm == DES:
            if len(raw) < 16 or len(raw) % 8:
                raise ValueError("length")
            key, iv = _des_key_iv(password, raw[:8])
            dec = Cipher(TripleDES(key), modes.CBC(iv)).decryptor()
            padded = dec.update(raw[8:]) + dec.finalize()
            unpadder = padding.PKCS7(64).unpadder()
        else:
            if len(raw) < 48 or len(raw) % 16:
                raise ValueError("length")
            dec = Cipher(algorithms.AES(_aes_key(password, raw[:16])), modes.CBC(raw[16:32])).decryptor()
            padded = dec.update(raw[32:]) + dec.finalize()
            unpadder = padding.PKCS7(128).unpadder()
        return (unpadder.update(padded) + unpadder.finalize()).decode("utf-8")
    except ValueError:  # bad padding, bad length or not UTF-8: the key or algorithm is wrong
        raise EncryptionError(
            f"cannot decrypt with {algorithm} and this key (wrong ACTIVEMQ_ENCRYPTION_PASSWORD, "
            "or the value was made with another algorithm)") from None
