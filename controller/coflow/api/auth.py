"""Identities for the coflow API: per-application bearer tokens, checked on every call.

Why tokens rather than mutual TLS: Mininet hosts (and any application in another network
namespace) reach the API over a unix socket, where TLS adds nothing and client certificates
would have to be issued, mounted and rotated per application; a token is one line in the
application's environment and works the same over the unix socket and over TCP. Over TCP the
server serves TLS (its certificate; the client checks it against a CA it is given), so a token
never crosses a network in clear: :func:`coflow.api.server.serve` refuses identities on a
plaintext TCP listener that is not loopback. The server keeps only each token's SHA-256 (the
file it reads holds no secret that would let its reader act as an application); a token is
compared in constant time.

The file (``coflow api serve --apps apps.json`` / ``coflow ctl run --api-apps apps.json``)::

    {"format": "coflow-apps/1",
     "apps": [{"name": "spark", "token_sha256": "9f86...", "max_coflows": 64, "max_flows": 4096},
              {"name": "ops", "token_sha256": "...", "admin": true}]}

``max_coflows`` (each registered coflow holds one of the switches' assigned slots, so this is
also the application's slot quota) and ``max_flows`` (flows over all its coflows: the rate
modes' meters) are optional (no limit). ``admin`` may change any coflow (an operator's tool);
others change only the coflows they registered (PERMISSION_DENIED otherwise) and read all.
``coflow api new-token NAME`` prints a fresh token and the line to add.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

FORMAT = "coflow-apps/1"
#: the metadata key a client sends its token in (``authorization: Bearer <token>``)
METADATA_KEY = "authorization"


class AuthError(Exception):
    """A call without a valid identity: ``field`` and ``message`` as the API's errors."""

    def __init__(self, message: str):
        super().__init__(f"{METADATA_KEY}: {message}")
        self.code, self.field, self.message = "UNAUTHENTICATED", METADATA_KEY, message

    @property
    def details(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class App:
    name: str
    token_sha256: str
    max_coflows: int | None = None
    max_flows: int | None = None
    admin: bool = False


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> tuple[str, str]:
    """(a fresh token, its SHA-256 for the apps file). URL-safe base64 of 32 random bytes that
    never starts with "-" (a command line would read such a token as an option: `--token -x...`
    failed one time in 64), redrawn until it does not."""
    while True:
        t = secrets.token_urlsafe(32)
        if not t.startswith("-"):
            return t, token_hash(t)


class Identities:
    """The applications the API knows, by token hash."""

    def __init__(self, apps):
        self.apps = {a.name: a for a in apps}
        self._by_hash = {a.token_sha256: a for a in apps}

    @classmethod
    def load(cls, path: str) -> "Identities":
        """Read an apps file; a bad one fails with one line naming the file and the entry."""
        try:
            with open(path) as f:
                doc = json.load(f)
        except OSError as e:
            raise ValueError(f"{path}: cannot read the apps file ({e.strerror})") from None
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
        return cls.parse(doc, path)

    @classmethod
    def parse(cls, doc, path: str = "apps") -> "Identities":
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"{path}: not a coflow apps file (\"format\": {FORMAT!r} missing)")
        items = doc.get("apps")
        if not isinstance(items, list) or not items:
            raise ValueError(f"{path}: \"apps\" must be a non-empty list")
        apps, names, hashes = [], set(), set()
        for i, a in enumerate(items):
            where = f"{path}: apps[{i}]"
            if not isinstance(a, dict):
                raise ValueError(f"{where}: expected an object")
            unknown = set(a) - {"name", "token_sha256", "max_coflows", "max_flows", "admin"}
            if unknown:
                raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
            name, h = a.get("name"), a.get("token_sha256")
            if not isinstance(name, str) or not name or not name.isprintable() or len(name) > 64:
                raise ValueError(f"{where}.name: a printable name of 1-64 characters is required")
            if name in names:
                raise ValueError(f"{where}.name: {name!r} appears twice")
            if not isinstance(h, str) or len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
                raise ValueError(f"{where}.token_sha256: 64 lowercase hex digits expected")
            if h in hashes:
                raise ValueError(f"{where}.token_sha256: the same token as another app")
            lim = {}
            for k in ("max_coflows", "max_flows"):
                v = a.get(k)
                if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                    raise ValueError(f"{where}.{k}: an integer >= 0 expected")
                lim[k] = v
            admin = a.get("admin", False)
            if not isinstance(admin, bool):
                raise ValueError(f"{where}.admin: true or false expected")
            names.add(name)
            hashes.add(h)
            apps.append(App(name, h, lim["max_coflows"], lim["max_flows"], admin))
        return cls(apps)

    def authenticate(self, metadata) -> App:
        """The application whose token the call carries (``metadata``: gRPC invocation
        metadata); AuthError when there is none or it is unknown."""
        values = [v for k, v in (metadata or ()) if k == METADATA_KEY]
        if not values:
            raise AuthError("a bearer token is required (metadata 'authorization: Bearer <token>')")
        if len(values) > 1:
            raise AuthError("more than one token")
        scheme, _, token = str(values[0]).partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError("expected 'Bearer <token>'")
        h = token_hash(token.strip())
        for known, app in self._by_hash.items():
            if hmac.compare_digest(known, h):
                return app
        raise AuthError("unknown token")

    def quota(self, owner: str) -> tuple[int | None, int | None]:
        a = self.apps.get(owner)
        return (a.max_coflows, a.max_flows) if a is not None else (None, None)
