"""``upkeep serve``: a database's SQL and subscriptions over the network (issue 21;
``papers/delta-pubsub-view-dissemination.txt``, ``specs/delta-dissemination.md`` D.12).

:mod:`.feed` (the durable changes of every subscription), :mod:`.hub` (subscriptions as
views, tokens, listeners), :mod:`.grants` (bearer tokens and table grants), :mod:`.app`
(the HTTP endpoints), :mod:`.server` (uvicorn, in this process).
"""

from .grants import GrantError, Principal, Tokens
from .hub import Event, Hub, TokenError
from .server import Server, ServiceError, serve

__all__ = ["Event", "GrantError", "Hub", "Principal", "Server", "ServiceError", "TokenError",
           "Tokens", "serve"]
