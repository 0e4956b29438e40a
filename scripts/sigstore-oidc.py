"""The test OIDC issuer of scripts/sigstore-stack.sh, and its trusted root.

  sigstore-oidc.py serve KEY.pem PORT            discovery and JWKS for
                                                 http://127.0.0.1:PORT/{email,github}
  sigstore-oidc.py token KEY.pem ISSUER CLAIMS   an ES256 ID token of ISSUER
  sigstore-oidc.py root FULCIO_URL REKOR_URL     a trusted_root.json of them

Tokens: audience "sigstore", valid 10 minutes; CLAIMS (JSON) are added to
the defaults of the issuer's kind (email: alice@example.com, verified;
github: a release workflow of vendor/gpu-setter).
"""
import base64
import hashlib
import http.server
import json
import sys
import time
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def load(path):
    return serialization.load_pem_private_key(open(path, "rb").read(), None)


def jwk(key):
    n = key.public_key().public_numbers()
    return {"kty": "EC", "crv": "P-256", "kid": "test", "alg": "ES256", "use": "sig",
            "x": b64u(n.x.to_bytes(32, "big")), "y": b64u(n.y.to_bytes(32, "big"))}


GITHUB = {
    "sub": "repo:vendor/gpu-setter:ref:refs/tags/v1.0.0",
    "job_workflow_ref": "vendor/gpu-setter/.github/workflows/release.yml@refs/tags/v1.0.0",
    "job_workflow_sha": "0123456789abcdef0123456789abcdef01234567",
    "sha": "0123456789abcdef0123456789abcdef01234567",
    "event_name": "push",
    "repository": "vendor/gpu-setter",
    "repository_id": "1",
    "repository_owner": "vendor",
    "repository_owner_id": "2",
    "repository_visibility": "public",
    "workflow": "release",
    "workflow_ref": "vendor/gpu-setter/.github/workflows/release.yml@refs/tags/v1.0.0",
    "workflow_sha": "0123456789abcdef0123456789abcdef01234567",
    "ref": "refs/tags/v1.0.0",
    "ref_type": "tag",
    "run_id": "3",
    "run_attempt": "1",
    "runner_environment": "github-hosted",
    "head_ref": "",
    "base_ref": "",
}


def token(key, issuer, claims):
    now = int(time.time())
    body = {"iss": issuer, "aud": "sigstore", "iat": now, "nbf": now, "exp": now + 600}
    if issuer.endswith("/github"):
        body.update(GITHUB)
    else:
        body.update({"sub": "alice", "email": "alice@example.com", "email_verified": True})
    body.update(claims)
    head = {"alg": "ES256", "kid": "test", "typ": "JWT"}
    signing = b64u(json.dumps(head, separators=(",", ":")).encode()) + "." + \
        b64u(json.dumps(body, separators=(",", ":")).encode())
    r, s = decode_dss_signature(key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
    return signing + "." + b64u(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def serve(key, port):
    base = f"http://127.0.0.1:{port}"
    suffix = "/.well-known/openid-configuration"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.endswith(suffix) and self.path[: -len(suffix)] in ("/email", "/github"):
                issuer = base + self.path[: -len(suffix)]
                body = {"issuer": issuer, "jwks_uri": base + "/jwks",
                        "authorization_endpoint": issuer + "/auth",
                        "token_endpoint": issuer + "/token",
                        "response_types_supported": ["id_token"],
                        "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["ES256"]}
            elif self.path == "/jwks":
                body = {"keys": [jwk(key)]}
            else:
                self.send_response(404)
                self.end_headers()
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()


def der(pem):
    return base64.b64decode("".join(l for l in pem.strip().splitlines() if not l.startswith("-----")))


def root(fulcio, rekor):
    bundle = json.load(urllib.request.urlopen(fulcio + "/api/v2/trustBundle"))
    chain = [base64.b64encode(der(c)).decode() for c in bundle["chains"][0]["certificates"]]
    spki = der(urllib.request.urlopen(rekor + "/api/v1/log/publicKey").read().decode())
    since = {"start": "2020-01-01T00:00:00Z"}
    return {
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "tlogs": [{"baseUrl": rekor, "hashAlgorithm": "SHA2_256",
                   "publicKey": {"rawBytes": base64.b64encode(spki).decode(),
                                 "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": since},
                   "logId": {"keyId": base64.b64encode(hashlib.sha256(spki).digest()).decode()}}],
        "certificateAuthorities": [{"subject": {"organization": "sigstore", "commonName": "local"},
                                    "uri": fulcio,
                                    "certChain": {"certificates": [{"rawBytes": c} for c in chain]},
                                    "validFor": since}],
        "ctlogs": [],
        "timestampAuthorities": [],
    }


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "serve":
        serve(load(sys.argv[2]), int(sys.argv[3]))
    elif what == "token":
        sys.stdout.write(token(load(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])))
    elif what == "root":
        print(json.dumps(root(sys.argv[2], sys.argv[3]), indent=2))
    else:
        sys.exit(f"unknown command {what}")
