"""`judge-mcp [--transport stdio|sse|http] [--host 127.0.0.1] [--port N]`, `judge-mcp --version`,
`judge-mcp config <host> [--root DIR ...]`, `judge-mcp tokens create|list|revoke`,
`judge-mcp eval TOOL DATASET [--suite F] [--min-pass-rate R] [--json F] [--junit F] [--html F]`."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import logging
import queue
import select
import sys
import threading
from collections.abc import Callable
from logging.handlers import QueueHandler, QueueListener
from typing import Any, NoReturn

# The imports below (the MCP SDK, the settings and the judges' modules they read) build ~140k objects that live as
# long as the process and leave ~1k garbage; the collector's passes over them while they are built cost ~60 ms of
# CPU, a tenth of the start. So it pauses while they are imported, then what they built is moved out of its
# sight (gc.freeze, as the warm-up's last step does for what the warm-up loads).
_collecting = gc.isenabled()
gc.disable()

from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402

from judges.errors import SECRETS, closest  # noqa: E402

from .auth import is_loopback  # noqa: E402
from .settings import Settings, load_settings  # noqa: E402

if _collecting:
    gc.freeze()
    gc.enable()

TRANSPORTS = """transports:
  stdio  (default) the host starts the server and speaks MCP on its stdin/stdout
  http   streamable HTTP at http://HOST:PORT/mcp, stateless (any replica answers any request); bearer tokens
         (JUDGE_MCP_TOKENS, or `judge-mcp tokens create`) decide the organization and role;
         GET /healthz and /readyz for a load balancer
  sse    the older HTTP+SSE transport, for clients that only speak it"""


def settings_help() -> str:
    """Every setting (from server/settings.py): its environment variable, default and one-line description."""
    from pydantic import AliasChoices

    lines = ["settings (environment variables; a bad value stops the server, naming the variable):"]
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        var = alias.choices[0] if isinstance(alias, AliasChoices) else f"JUDGE_MCP_{name.upper()}"
        default = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
        shown = "unset" if default in (None, [], {}) else str(default)
        lines.append(f"  {var} (default: {shown})")
        lines.append(f"      {' '.join((field.description or '').split())}")
    return "\n".join(lines)


def _port(text: str) -> int:
    """A TCP port, 1..65535 (argparse says which argument and the value when it is not)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number; use 1..65535, e.g. --port 8000") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number; use 1..65535, e.g. --port 8000")
    return port


class _Parser(argparse.ArgumentParser):
    """argparse's parser (its subcommands' too), whose "invalid choice" error also names the closest valid one
    (`judge-mcp chek`: "did you mean 'check'?")."""

    def error(self, message: str) -> NoReturn:
        import re

        invalid = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        near = closest(invalid.group(1), re.findall(r"'([^']*)'", invalid.group(2))) if invalid else None
        super().error(message + (f"; did you mean {near!r}?" if near else ""))


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="judge-mcp", description="An MCP server with a bench of LLM judges.",
                                epilog=f"{TRANSPORTS}\n\n{settings_help()}",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transport", choices=["stdio", "sse", "http"], default="stdio",
                   help="stdio (default), http (streamable HTTP at /mcp) or sse; see transports below")
    p.add_argument("--host", default="127.0.0.1", help="bind address for sse/http (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port for sse/http (default 8000)")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", metavar="{config,check,tokens,eval}")
    check = sub.add_parser("check", help="say whether the model, the gate sandbox, the store and the roots are ok "
                                         "or missing, with what to do; exit 1 when something the configuration "
                                         "asks for cannot work")
    check.add_argument("--model", action="store_true", help="also send the model one tiny request and say "
                                                            "whether it answered (a problem when it does not)")
    config = sub.add_parser("config", help="print a ready server block for a host's MCP configuration "
                                           "(absolute paths, the data home and every setting set in this "
                                           "environment; keys and tokens as placeholders), then exit")
    config.add_argument("host", choices=["claude-desktop", "cursor", "vscode", "claude-code"])
    config.add_argument("--root", action="append", dest="roots", metavar="DIR",
                        help="a directory the tools may read and write (repeatable; default: JUDGE_MCP_ALLOWED_ROOTS "
                             "when set, else the current directory)")
    tokens = sub.add_parser("tokens", help="manage the HTTP bearer tokens stored (hashed) in the database")
    tsub = tokens.add_subparsers(dest="tokens_command", metavar="{create,list,revoke}", required=True)
    create = tsub.add_parser("create", help="create a token and print its secret (shown this once)")
    create.add_argument("--org", required=True, help="the organization the token acts for")
    create.add_argument("--role", choices=["member", "admin", "superadmin"], default="member",
                        help="member (judge, compare, search, read; default), admin (also manage agents and "
                             "guideline documents), superadmin (every organization)")
    create.add_argument("--name", default="", help="a label to recognise the token by in `tokens list`")
    listing = tsub.add_parser("list", help="list tokens (never their secrets)")
    listing.add_argument("--org", help="only this organization's tokens")
    revoke = tsub.add_parser("revoke", help="revoke a token by its id (from `tokens list`)")
    revoke.add_argument("token_id")
    from .eval import add_parser

    add_parser(sub)
    return p


def run_tokens(settings: Settings, args: argparse.Namespace) -> int:
    """`judge-mcp tokens create|list|revoke`: output on stdout, errors on stderr; 0 on success."""
    from judges.errors import InputError
    from judges.store.access import TokenStore
    from judges.store.database import open_database

    db = open_database(settings.database_url, settings.database_path,
                       start_wait_s=settings.database_start_wait_s)
    try:
        store = TokenStore(db)
        # A CLI command, not the stdio server: its output is written to stdout, its errors to stderr.
        if args.tokens_command == "create":
            try:
                token, secret = store.create(args.org, args.role, args.name)
            except InputError as exc:
                sys.stderr.write(f"judge-mcp tokens create: {exc}\n")
                return 2
            sys.stdout.write(f"token {token.id} for organization {token.organization_id}, role {token.role}\n"
                             f"secret (shown once; send it as 'Authorization: Bearer <secret>'):\n{secret}\n")
            return 0
        if args.tokens_command == "list":
            for t in store.list(args.org):
                state = f"revoked {t.revoked_at}" if t.revoked_at else "live"
                line = f"{t.id}  {t.organization_id}  {t.role}  {state}  created {t.created_at}  {t.name}"
                sys.stdout.write(line.rstrip() + "\n")
            return 0
        if store.revoke(args.token_id):
            sys.stdout.write(f"token {args.token_id} revoked\n")
            return 0
        sys.stderr.write(f"judge-mcp tokens revoke: no live token with id {args.token_id!r} "
                         "(see `judge-mcp tokens list`)\n")
        return 1
    finally:
        db.close()


def has_stored_tokens(settings: Settings) -> bool:
    """True when the database holds a live token (then HTTP requires bearer tokens even without
    JUDGE_MCP_TOKENS)."""
    return bool(stored_token_owners(settings))


def stored_token_owners(settings: Settings) -> list[tuple[str, str]]:
    """The (organization, role) of every live token stored in the database."""
    if not settings.database_url and not settings.database_path.exists():
        return []
    from judges.store.access import TokenStore
    from judges.store.database import open_database

    db = open_database(settings.database_url, settings.database_path,
                       start_wait_s=settings.database_start_wait_s)
    try:
        return [(t.organization_id, t.role) for t in TokenStore(db).list() if t.revoked_at is None]
    finally:
        db.close()


class _Version(argparse.Action):
    """--version: the installed version, looked up only when asked (the lookup reads the installed packages'
    metadata, a few ms of every start otherwise)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        sys.stdout.write(f"judge-mcp {_version()}\n")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("judge-mcp")
    except PackageNotFoundError:
        return "unknown"


def http_security(settings: Settings, host: str, port: int, *, stored_tokens: bool = False) -> TransportSecuritySettings:
    """Transport security for an HTTP bind; SystemExit when the bind would be unsafe."""
    if is_loopback(host):
        hosts = [f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")] + ["127.0.0.1", "localhost", "[::1]"]
        origins = [f"http://{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")]
        return TransportSecuritySettings(
            allowed_hosts=hosts + settings.allowed_hosts, allowed_origins=origins + settings.allowed_origins
        )
    if not settings.tokens and not stored_tokens:
        raise SystemExit(
            f"judge-mcp: refusing to listen on {host} without bearer tokens: set JUDGE_MCP_TOKENS "
            "('token=organization,...'), create one with `judge-mcp tokens create`, or bind to 127.0.0.1."
        )
    if not settings.allowed_hosts:
        raise SystemExit(
            f"judge-mcp: listening on {host} needs JUDGE_MCP_ALLOWED_HOSTS (the Host headers clients use, "
            "e.g. 'judge.example.com,judge.example.com:443') for DNS-rebinding protection."
        )
    return TransportSecuritySettings(allowed_hosts=settings.allowed_hosts, allowed_origins=settings.allowed_origins)


OWN_LOGGERS = ("judge_mcp", "server", "judges", "rag", "prompts", "mcp")


class _OthersAtWarning(logging.Filter):
    """Libraries (onnxruntime's quantizer logs on the root logger, bm25s at DEBUG) reach stderr only
    from WARNING up; our own loggers and the MCP SDK's at the configured level."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.split(".")[0] in OWN_LOGGERS


class _Writer(QueueListener):
    """Writes the queued lines as they come, each batch (every line queued while the last was written) in one
    write: under load, fewer moments when the event loop's thread waits for the interpreter lock. It never
    waits for more lines, so a call's line is on stderr as soon as the call has answered (tests read it)."""

    def __init__(self, lines: queue.SimpleQueue[logging.LogRecord | None], stream: logging.Handler,
                 written: Callable[[int], None] = lambda n: None) -> None:
        super().__init__(lines, stream)
        self.lines, self.written = lines, written

    def _monitor(self) -> None:
        lines = self.lines
        while True:
            batch = [lines.get()]
            while batch[-1] is not None:  # None: QueueListener.stop()'s sentinel
                try:
                    batch.append(lines.get_nowait())
                except queue.Empty:
                    break
            records = [r for r in batch if r is not None]
            self._write(records)
            self.written(len(records))
            if batch[-1] is None:
                return

    def _write(self, records: list[logging.LogRecord]) -> None:
        """The batch in one write and one flush (each a moment the event loop's thread waits for the lock)."""
        handler = self.handlers[0]
        if not isinstance(handler, logging.StreamHandler) or len(records) < 2:
            for record in records:
                self.handle(record)
            return
        try:
            text = "".join(handler.format(r) + handler.terminator for r in records if handler.filter(r))
            with handler.lock or contextlib.nullcontext():
                handler.stream.write(text)
                handler.flush()
        except Exception:
            for record in records:
                handler.handleError(record)


class _Queued(QueueHandler):
    """A short line with nothing queued before it is written at once by the caller, when stderr can take it
    without waiting (a file, or a pipe with room: poll says so, and a write of at most PIPE_BUF bytes is whole);
    any other line (a traceback, a long one, or stderr full because the host does not read it) is queued for the
    writer thread, and so is every line after it until the queue is written. So the event loop never waits for
    stderr, lines keep their order, and a call's line costs no hand-off to another thread (~0.1 ms of CPU a
    call under load, bench/http_load.py). flush() writes every queued line before it returns (a signal handler
    flushes, then ends the process with os._exit, which runs no atexit hook)."""

    def __init__(self, lines: queue.SimpleQueue[logging.LogRecord | None], stream: logging.Handler) -> None:
        super().__init__(lines)
        self.stream = stream
        self._counting = threading.Lock()  # guards _queued; never held while writing
        self._queued = 0  # lines queued and not yet written
        self._ready = _room_poller(stream)
        self.listener = _Writer(lines, stream, self._written)
        self.listener.start()

    def _written(self, n: int) -> None:
        with self._counting:
            self._queued -= n

    def emit(self, record: logging.LogRecord) -> None:
        if self._ready is not None and record.exc_info is None and record.stack_info is None:
            stream = self.stream
            with self._counting:
                # The stream handler's own lock is the one its writes take: not waiting for it keeps the caller
                # off a write the writer thread has begun (the line is queued behind it instead).
                now = self._queued == 0 and stream.lock is not None and stream.lock.acquire(blocking=False)
            if now:
                assert stream.lock is not None
                try:
                    if stream.filter(record):
                        line = stream.format(record) + getattr(stream, "terminator", "\n")
                        if len(line.encode("utf-8", "replace")) > _WHOLE or not self._ready():
                            now = False
                        else:
                            stream.stream.write(line)  # type: ignore[attr-defined]
                            stream.flush()
                except Exception:
                    stream.handleError(record)
                finally:
                    stream.lock.release()
                if now:
                    return
        with self._counting:
            self._queued += 1
        super().emit(record)

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        # The caller's share of a line is only its message: the base class also formats and copies the record,
        # which was most of a logged call's cost on the event loop. The writer thread formats the line (and any
        # traceback: the record stays in this process, so exc_info may travel as it is).
        record.msg, record.args = record.getMessage(), None
        return record

    def flush(self) -> None:
        # Stopping drains the queue and ends the writer thread; a new one takes over, because flush() is also
        # called by logging.shutdown(), which logging.config.dictConfig runs when uvicorn sets up its own log:
        # ending the writer there silenced every later line of an HTTP server.
        if self.listener._thread is not None:
            self.listener.stop()
            self.listener.start()


_WHOLE = getattr(select, "PIPE_BUF", 512)  # a pipe write of at most this many bytes is never split


def _room_poller(handler: logging.Handler) -> Callable[[], bool] | None:
    """A check that the handler's stream takes a short write now without waiting; None where it cannot be told
    (no poll(2), e.g. on Windows): then every line goes through the writer thread."""
    stream = getattr(handler, "stream", None)
    if stream is None or not hasattr(select, "poll"):
        return None
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream (tests): a write never waits
        return lambda: True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return lambda: any(mask & select.POLLOUT for _, mask in poller.poll(0))


class _Scrubbed(logging.Formatter):
    """Every line `inner` formats, traceback included, with the settings' secrets masked (an upstream error body
    may carry a key; an exception a database URL)."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return SECRETS.scrub(self.inner.format(record))


def start_telemetry(settings: Any, *, http: bool) -> None:
    """OpenTelemetry traces when OTEL_EXPORTER_OTLP_ENDPOINT is set (flushed at exit), Prometheus metrics on the HTTP
    transports (judges/telemetry.py); neither imports anything otherwise."""
    import atexit

    from judges import telemetry

    if telemetry.tracing_configured():
        from importlib.metadata import PackageNotFoundError, version

        try:
            ours = version("judge-mcp")
        except PackageNotFoundError:
            ours = "0"
        if telemetry.start_tracing(ours):
            atexit.register(telemetry.stop_tracing)
    if http and settings.metrics:
        telemetry.start_metrics((settings.model, settings.anthropic_model, settings.openai_model,
                                 settings.compatible_model))


def scrub_uvicorn_log() -> None:
    """uvicorn's own handlers (set up by its Config) mask secrets too."""
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            if not isinstance(handler.formatter, _Scrubbed):
                handler.setFormatter(_Scrubbed(handler.formatter))


def configure_logging(level: str) -> None:
    """One stderr handler (stdout belongs to the stdio protocol), written by its own thread: a tool call only
    queues its log line, the write to stderr (a syscall, slow on some hosts) happens off the event loop."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Scrubbed(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")))
    queued = _Queued(queue.SimpleQueue(), handler)
    queued.addFilter(_OthersAtWarning())
    atexit.register(queued.flush)  # every queued line is written before the process ends
    logging.basicConfig(level=level, handlers=[queued])
    logging.captureWarnings(True)  # libraries' warnings as our log lines (py.warnings), not raw text on stderr


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    settings = load_settings()
    if args.command == "check":
        from .check import run_check

        raise SystemExit(run_check(settings, model=args.model))
    if args.command == "tokens":
        raise SystemExit(run_tokens(settings, args))
    if args.command == "eval":
        from .eval import run_eval_command

        # The per-call log lines would bury the progress: warnings only, unless JUDGE_MCP_LOG_LEVEL asks for more.
        configure_logging(settings.log_level if "log_level" in settings.model_fields_set else "WARNING")
        raise SystemExit(run_eval_command(settings, args))
    if args.command == "config":
        from .host_config import print_host_config

        try:
            print_host_config(args.host, args.roots, settings)
        except ValueError as exc:
            raise SystemExit(f"judge-mcp config: {exc}") from None
        return
    configure_logging(settings.log_level)
    from judges.errors import UnavailableError

    try:
        _serve(args, settings)
    except UnavailableError as exc:  # the database did not answer at start: one sentence, not a traceback
        raise SystemExit(f"judge-mcp: {exc} ({exc.failure.hint})") from None


def _serve(args: argparse.Namespace, settings: Settings) -> None:
    from .app import create_server

    start_telemetry(settings, http=args.transport != "stdio")

    if args.transport == "stdio":
        import anyio

        from .stdio import serve_stdio, stop_on_signals

        stop_on_signals()
        anyio.run(serve_stdio, create_server(settings))
        return
    owners = stored_token_owners(settings)
    stored = bool(owners)
    security = http_security(settings, args.host, args.port, stored_tokens=stored)
    base_url = f"http://{args.host}:{args.port}"
    http_auth = bool(settings.tokens) or stored
    from .roots import shared_roots_owner, warn_shared_org_roots

    warn_shared_org_roots(settings)
    roots_owner = shared_roots_owner(settings, owners) if http_auth else None
    server = create_server(settings, http_auth=http_auth, base_url=base_url, client_roots=False,
                           roots_owner=roots_owner)
    if args.transport == "sse":
        server.run("sse", host=args.host, port=args.port, transport_security=security,
                   max_request_body_size=settings.request_body_limit)
    else:
        import uvicorn

        # Stateless (the default): no Mcp-Session-Id, nothing kept between requests, so a load balancer may send
        # each request to any replica; progress and log notifications still flow on the request's own SSE stream.
        app = server.streamable_http_app(transport_security=security, host=args.host,
                                         max_request_body_size=settings.request_body_limit,
                                         stateless_http=settings.stateless_http)
        # No access log: every tool call has its own log line (server/errors.py), and a line per HTTP request
        # written on the event loop cost a fifth of a cheap call's time (bench/http_load.py).
        config = uvicorn.Config(app, host=args.host, port=args.port, access_log=False,
                                timeout_keep_alive=settings.http_keepalive_s, log_level=settings.log_level.lower())
        scrub_uvicorn_log()
        uvicorn.Server(config).run()
