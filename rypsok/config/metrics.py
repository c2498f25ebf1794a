"""`[service.metrics]`: where the Prometheus exposition is served, and its operator token.

The table is optional: without it nothing more listens. Its bind is its own, apart from the
MCP listener's: metrics are operator data (the book's Deployment page), never served with a
caller's token. The token, when given, is read as a caller's is (`token_env` or
`token_file`, at least 32 bytes), once at start; `check` refuses what `serve` would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rypsok.config.rules import parse_bind
from rypsok.config.schema import MetricsConfig

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from rypsok.config.reader import Table
    from rypsok.config.rules import Bind
    from rypsok.config.schema import Config
    from rypsok.shared.secret import Secret

__all__ = ["metrics_line", "metrics_token", "read_metrics"]

_KEY = "service.metrics"


def read_metrics(
    t: Table,
    *,
    mcp_bind: str,
    env_name: Callable[[str], object],
    path: Callable[[str], object],
) -> MetricsConfig:
    """The values of a `[service.metrics]` table that is present in the file."""
    t.known(keys={"bind", "token_env", "token_file"})
    bind = t.get_text("bind", check=parse_bind)
    token_env = t.get_text("token_env", check=env_name)
    token_file = t.get_text("token_file", check=path)
    if token_env is not None and token_file is not None:
        raise t.v.fail(t.key("token_file"), "give one of token_env or token_file, not both")
    if parse_bind(bind) == parse_bind(mcp_bind):
        raise t.v.fail(
            t.key("bind"),
            "must differ from service.http.bind: metrics are served on a bind of their own",
        )
    if _takes_the_port_of(parse_bind(bind), parse_bind(mcp_bind)):
        raise t.v.fail(
            t.key("bind"),
            "must differ from service.http.bind: an unspecified address (0.0.0.0, ::) takes its"
            " port on every address of its family, so the two cannot both listen; choose"
            " another port",
        )
    if not parse_bind(bind).is_loopback and token_env is None and token_file is None:
        raise t.v.fail(
            t.key("bind"),
            "a non-loopback bind needs token_env or token_file (the operator's token)",
            placed=False,
        )
    return MetricsConfig(bind=bind, token_env=token_env, token_file=token_file)


def _takes_the_port_of(one: Bind, other: Bind) -> bool:
    """Whether `one` and `other` cannot both listen: the same port and family, one of them
    the unspecified address (the listeners bind IPv6 alone, so the families never meet)."""
    return (
        one.port == other.port
        and one.host.version == other.host.version
        and (one.is_unspecified or other.is_unspecified)
    )


def metrics_token(config: Config, env: Mapping[str, str]) -> Secret | None:
    """The operator's token of `[service.metrics]`, or None when it has none; ConfigError
    for a token serve would refuse (unset, empty, unreadable, too short, or a caller's: it
    would open /metrics to that caller and /mcp to the operator)."""
    from rypsok.config.messages import ConfigError
    from rypsok.config.schema import CallerConfig
    from rypsok.config.secrets import caller_token, read_caller_tokens

    metrics = config.service.metrics
    if metrics is None or (metrics.token_env is None and metrics.token_file is None):
        return None
    holder = CallerConfig(id="metrics", token_env=metrics.token_env, token_file=metrics.token_file)
    token = caller_token(_KEY, holder, env)
    callers = read_caller_tokens(config, env) if config.service.http.auth.callers else {}
    for index, caller in enumerate(config.service.http.auth.callers):
        if callers[caller.id] == token:
            held = "token_env" if metrics.token_env is not None else "token_file"
            raise ConfigError(
                f"{_KEY}.{held}: the token is the same as the token of "
                f"service.http.auth.callers[{index}]; give the operator a token of its own"
            )
    return token


def metrics_line(metrics: MetricsConfig) -> str:
    """`check`'s line for a `[service.metrics]` table: the bind and the token's source."""
    if metrics.token_env is not None:
        token = f"token_env={metrics.token_env}"
    elif metrics.token_file is not None:
        token = "token_file=set"
    else:
        token = "token=none"
    return f"service.metrics: bind={parse_bind(metrics.bind)} path=/metrics {token}"
