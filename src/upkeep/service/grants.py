"""Who may do what on a served database: bearer tokens mapped to principals and grants.

The tokens file is JSON::

    {"tokens": {
        "<secret>": {"name": "alice", "read": ["orders", "customer"], "write": ["orders"]},
        "<secret>": {"name": "ops", "read": "*", "write": "*", "admin": true}}}

``read``: the tables whose rows the principal may see, through SQL over any view, and
through subscriptions (a view is readable when every table under it is).  ``write``: the
tables it may change with INSERT / UPDATE / DELETE.  ``admin``: CREATE and DROP, and ending
any subscription.  ``relay``: joining the placements as a site (a URL other members are
placed at: they present their own tokens there, so only relays the operator runs get it;
an admin may too).  Any other key is refused when the file is read (a misspelt grant must
not be no grant).  A request without a known token is answered 401; one outside its grants
403, naming the table.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import Error

ALL = "*"
#: the keys of a token's entry
ENTRY_KEYS = ("name", "read", "write", "admin", "relay")


class GrantError(Error):
    """A principal asked for a table or an action it is not granted."""


class TokensFileError(Error):
    """A tokens file that cannot be read or is not of the documented shape."""


@dataclass(frozen=True)
class Principal:
    name: str
    read: frozenset[str] | str = frozenset()
    write: frozenset[str] | str = frozenset()
    admin: bool = False
    relay: bool = False

    def may_read(self, table: str) -> bool:
        return self.read == ALL or table in self.read

    def check_read(self, tables: Iterable[str]) -> None:
        denied = sorted(t for t in tables if not self.may_read(t))
        if denied:
            raise GrantError(f"{self.name} may not read table {', '.join(denied)}")

    def check_write(self, table: str) -> None:
        if not (self.write == ALL or table in self.write):
            raise GrantError(f"{self.name} may not write table {table}")

    def check_admin(self, what: str) -> None:
        if not self.admin:
            raise GrantError(f"{self.name} may not {what} (admin only)")

    def check_relay(self) -> None:
        if not (self.relay or self.admin):
            raise GrantError(f"{self.name} may not join as a site that feeds other members "
                             "(the relay grant)")

    def check_owner(self, owner: str) -> None:
        if not self.admin and owner != self.name:
            raise GrantError(f"{self.name} may not end a subscription {owner} created")


class Tokens:
    """Bearer tokens to principals; looked up by a hash, compared in constant time."""

    def __init__(self, principals: dict[str, Principal]) -> None:
        self._by_digest = {_digest(t): (t, p) for t, p in principals.items()}

    def principal(self, token: str | None) -> Principal | None:
        if not token:
            return None
        found = self._by_digest.get(_digest(token))
        if found is None or not hmac.compare_digest(found[0], token):
            return None
        return found[1]

    @classmethod
    def load(cls, path: str | Path) -> Tokens:
        """Read a tokens file (see the module docstring)."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise TokensFileError(f"tokens file {path}: {exc}") from None
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: object, where: str = "tokens") -> Tokens:
        entries = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(entries, dict) or not entries:
            raise TokensFileError(f'{where}: expected {{"tokens": {{"<secret>": {{...}}}}}}')
        for key in data:
            if key != "tokens":
                raise TokensFileError(f'{where}: a key "{key}" it does not know (only '
                                      '"tokens")')
        principals = {}
        for token, spec in entries.items():
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise TokensFileError(f"{where}: the entry of a token needs a \"name\"")
            for key in spec:
                if key not in ENTRY_KEYS:  # a misspelt grant must not be no grant
                    raise TokensFileError(
                        f"{where}: {spec['name']}'s entry has a key \"{key}\" it does not "
                        f"know (the keys are {', '.join(ENTRY_KEYS)})")
            if len(token) < 16:
                raise TokensFileError(f"{where}: {spec['name']}'s token is shorter than 16 "
                                      "characters")
            if not (token.isascii() and token.isprintable()):  # an HTTP header carries it
                raise TokensFileError(f"{where}: {spec['name']}'s token holds a character "
                                      "that is not printable ASCII")
            flags = {}
            for flag in ("admin", "relay"):
                value = flags[flag] = spec.get(flag, False)
                if not isinstance(value, bool):  # "false" is a string, true as bool() reads it
                    raise TokensFileError(f"{where}: {spec['name']}'s \"{flag}\" must be true "
                                          f"or false, not {json.dumps(value)}")
            principals[token] = Principal(spec["name"], _tables(spec.get("read", []), where),
                                          _tables(spec.get("write", []), where), **flags)
        return cls(principals)


def _tables(value: object, where: str) -> frozenset[str] | str:
    if value == ALL:
        return ALL
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise TokensFileError(f'{where}: "read" and "write" are "*" or a list of table names')
    return frozenset(t.lower() for t in value)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
