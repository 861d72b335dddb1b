"""oauthlib.py — JSON Web Tokens and key sets for the OAUTHBEARER tests, written here with
`cryptography` (Debian's python3-cryptography), independent of the broker's own code.

Keys:   Key.rsa(kid) / Key.ec(kid) -> .jwk() (the public JWK), .sign(claims, **header)
Tokens: unsecured(claims) -> "header.claims." with alg none (Kafka's unsecured form)
Wire:   client_message(token, authzid=None) -> RFC 7628's client initial response
"""

import base64
import json
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _uint(n):
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


def part(obj):
    return b64url(json.dumps(obj, separators=(",", ":")).encode())


class Key:
    def __init__(self, kind, kid, priv):
        self.kind, self.kid, self.priv = kind, kid, priv

    @classmethod
    def rsa(cls, kid, bits=2048):
        return cls("RSA", kid, rsa.generate_private_key(public_exponent=65537, key_size=bits))

    @classmethod
    def ec(cls, kid):
        return cls("EC", kid, ec.generate_private_key(ec.SECP256R1()))

    @property
    def alg(self):
        return "RS256" if self.kind == "RSA" else "ES256"

    def jwk(self):
        pub = self.priv.public_key().public_numbers()
        if self.kind == "RSA":
            return {"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                    "n": b64url(_uint(pub.n)), "e": b64url(_uint(pub.e))}
        return {"kty": "EC", "kid": self.kid, "use": "sig", "crv": "P-256",
                "x": b64url(pub.x.to_bytes(32, "big")), "y": b64url(pub.y.to_bytes(32, "big"))}

    def sign(self, claims, **header):
        h = {"alg": self.alg, "typ": "JWT", "kid": self.kid}
        h.update(header)
        h = {k: v for k, v in h.items() if v is not None}
        signing_input = (part(h) + "." + part(claims)).encode()
        if self.kind == "RSA":
            sig = self.priv.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        else:
            r, s = decode_dss_signature(self.priv.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return signing_input.decode() + "." + b64url(sig)


def jwks(*keys):
    return json.dumps({"keys": [k.jwk() for k in keys]})


def claims(sub="alice", aud="strata", iss="https://issuer.test", life=3600, **extra):
    now = int(time.time())
    c = {"sub": sub, "aud": aud, "iss": iss, "iat": now, "exp": now + life, "scope": "kafka"}
    c.update(extra)
    return {k: v for k, v in c.items() if v is not None}


def unsecured(c):
    return part({"alg": "none"}) + "." + part(c) + "."


def client_message(token, authzid=None):
    gs2 = "n,a=%s," % authzid if authzid else "n,,"
    return ("%s\x01auth=Bearer %s\x01\x01" % (gs2, token)).encode()
