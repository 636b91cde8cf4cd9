"""Print an ID token of the local identity provider for one person (``make token``).

    python -m local.issue_token alice [--admin] [--password PW] [--port 3000 | --auth-file FILE]

Needs ``make local`` running (it writes ``.local/<PORT>/auth.json``, ``--port`` its API's port).
The token is obtained the standard way: ``AdminCreateUser`` if the user is new,
``AdminSetUserPassword`` (permanent), ``AdminAddUserToGroup admins`` with ``--admin`` (without it
the user is taken out of ``admins``, so the token says what was asked), then ``AdminInitiateAuth``
with ``ADMIN_USER_PASSWORD_AUTH``.
Without ``--password`` a fresh random password is set each time.

Prints the token alone on stdout (``TOKEN=$(make -s token USER=alice)`` captures just it) and, on
stderr, who it is for: the username, the user id (``sub``, the ``{userId}`` of
``/users/{userId}/...``) and the groups. With no ``make local`` running it says to start one.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from botocore.exceptions import EndpointConnectionError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "functions"))

from local.identity import AuthConfig, auth_file, cognito_client  # noqa: E402
from service.policy import ADMINS_GROUP  # noqa: E402

DEFAULT_PORT = 3000  # make local's


def random_password() -> str:
    """Meets the stack's policy (12+ characters, lower, upper, digit, symbol)."""
    return "Aa1!" + secrets.token_urlsafe(18)


def ensure_user(client: Any, pool_id: str, username: str, *, password: str, admin: bool) -> None:
    with contextlib.suppress(client.exceptions.UsernameExistsException):
        client.admin_create_user(UserPoolId=pool_id, Username=username, MessageAction="SUPPRESS")
    client.admin_set_user_password(
        UserPoolId=pool_id, Username=username, Password=password, Permanent=True
    )
    if admin:
        client.admin_add_user_to_group(
            UserPoolId=pool_id, Username=username, GroupName=ADMINS_GROUP
        )
    else:
        client.admin_remove_user_from_group(
            UserPoolId=pool_id, Username=username, GroupName=ADMINS_GROUP
        )


def id_token(
    config: AuthConfig,
    username: str,
    *,
    admin: bool = False,
    password: str | None = None,
    client: Any = None,
) -> str:
    """Create or update ``username`` and return a fresh ID token for them. ``client``: a
    ``cognito-idp`` client to reuse (creating one costs ~0.25 s; tests create many users)."""
    return authenticate(config, username, admin=admin, password=password, client=client)["IdToken"]


def authenticate(
    config: AuthConfig,
    username: str,
    *,
    admin: bool = False,
    password: str | None = None,
    client: Any = None,
) -> dict[str, str]:
    """As :func:`id_token`, but the whole ``AuthenticationResult``: ``IdToken``, and the
    ``RefreshToken`` a client renews it with (``REFRESH_TOKEN_AUTH``; the soak does)."""
    if client is None:
        client = cognito_client(config.endpoint, config.region)
    password = password or random_password()
    ensure_user(client, config.user_pool_id, username, password=password, admin=admin)
    result = client.admin_initiate_auth(
        UserPoolId=config.user_pool_id,
        ClientId=config.client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": username, "PASSWORD": password},
    )
    return {key: str(value) for key, value in result["AuthenticationResult"].items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("user")
    parser.add_argument("--admin", action="store_true", help="member of the admins group")
    parser.add_argument("--password", help="set this password (default: a random one)")
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("PORT", DEFAULT_PORT)),
        help="the API port of the make local to ask (default: $PORT or 3000)",
    )
    parser.add_argument("--auth-file", type=Path, help="default: .local/<port>/auth.json")
    args = parser.parse_args(argv)
    args.auth_file = args.auth_file or auth_file(args.port)
    if not args.auth_file.exists():
        print(
            f"no make local is running on port {args.port} ({args.auth_file} not found): "
            f"start it with `make local`{port_hint(args.port)}",
            file=sys.stderr,
        )
        return 2
    config = AuthConfig.load(args.auth_file)
    try:
        token = id_token(config, args.user, admin=args.admin, password=args.password)
    except EndpointConnectionError:
        print(
            f"nothing answers at {config.endpoint}, the identity provider {args.auth_file} "
            f"names: that make local has stopped; start it with `make local`{port_hint(args.port)}",
            file=sys.stderr,
        )
        return 2
    except Exception as error:  # noqa: BLE001 - a CLI: one clear line instead of a traceback
        print(f"cannot get a token from {config.endpoint}: {error}", file=sys.stderr)
        return 1
    print(token)  # stdout: the token alone, so TOKEN=$(make -s token ...) captures just it
    print(who(token), file=sys.stderr)
    return 0


def port_hint(port: int) -> str:
    return "" if port == DEFAULT_PORT else f" PORT={port}"


def who(token: str) -> str:
    """The token's person, as the API sees them: username, user id (``sub``: the ``{userId}`` of
    ``/users/{userId}/...``) and groups. Read from the token's payload, unverified: it was just
    issued by the provider this command asked."""
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    groups = claims.get("cognito:groups") or []
    return (
        f"user {claims.get('cognito:username')}  sub (user id) {claims['sub']}  "
        f"groups {','.join(groups) if groups else '(none)'}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
