"""Where a portable runner sends the job (``--job_endpoint``, ``--flink_master``): checked at launch, and its
failures told in one line.

Beam only finds an unreachable endpoint once the job is submitted, after OUTPUT's lease is taken: a closed
``--job_endpoint`` port waits ``--job_server_timeout`` (300 s by default) and then raises an empty
``FutureTimeoutError``; a closed ``--flink_master`` is found by Flink's job server after about a minute of
retries, as ``java.net.ConnectException``. So :func:`check_endpoint` opens a TCP connection to it first, in
at most :data:`CONNECT_SECONDS` (or ``--job_server_timeout``, when shorter): refused or unreachable is a
:class:`UsageError` (exit 2) naming the address and what to check, before anything is read or written.
:func:`job_failure` words what fails after that.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import grpc
from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions, PortableOptions
from apache_beam.runners.portability.flink_runner import MAGIC_HOST_NAMES, FlinkRunner
from apache_beam.runners.portability.portable_runner import PortableRunner
from apache_beam.runners.runner import PipelineRunner

from pipelines.errors import UsageError
from pipelines.redact import bounded

CONNECT_SECONDS = 10.0  # a host that drops packets: the launch waits this long (or a shorter --job_server_timeout)
_DETAIL_CHARS = 1000  # a Java exception's message can hold its whole stack
_HEAD_CHARS = 300  # of a failed job's message before its traceback: the exception after it must fit
_TRACEBACK = "Traceback (most recent call last):"
FLINK_REST_PORT = 8081  # Flink's rest.port default, which its job server takes when --flink_master has none

_WHAT_TO_CHECK = {
    "--job_endpoint": "check that the job server (Flink's, Spark's or Beam's) runs there and listens on that port",
    "--flink_master": "check that the Flink cluster runs and that its REST address and port (rest.address, "
    f"rest.port, {FLINK_REST_PORT} by default) are reachable from this machine",
}


def endpoint(runner: PipelineRunner, options: PipelineOptions) -> tuple[str, str] | None:
    """(option, address) the runner will connect to, as Beam chooses it: ``--job_endpoint`` first (not
    ``embed``), else a FlinkRunner's ``--flink_master`` (not ``[auto]``/``[local]``); None for other runners."""
    if not isinstance(runner, PortableRunner):
        return None
    job_endpoint = options.view_as(PortableOptions).job_endpoint
    if job_endpoint:
        return None if job_endpoint == "embed" else ("--job_endpoint", job_endpoint)
    master = options.view_as(FlinkRunnerOptions).flink_master
    if isinstance(runner, FlinkRunner) and master.strip() not in MAGIC_HOST_NAMES:
        return "--flink_master", master.strip()
    return None


def check_endpoint(runner: PipelineRunner, options: PipelineOptions) -> None:
    """UsageError when the runner's endpoint refuses or does not answer a TCP connection, or a
    ``--job_endpoint`` does not answer as a gRPC server (HTTP/2), each in at most CONNECT_SECONDS."""
    target = endpoint(runner, options)
    if target is None:
        return
    option, address = target
    host_port = _host_port(address, FLINK_REST_PORT if option == "--flink_master" else None)
    if host_port is None:  # a gRPC target such as dns:///host:port: left to Beam
        return
    where = f"{option} {address}: {host_port[0]}:{host_port[1]}"
    seconds = min(CONNECT_SECONDS, options.view_as(PortableOptions).job_server_timeout or CONNECT_SECONDS)
    try:
        _connect(host_port, seconds)
    except OSError as err:
        reason = f"no answer in {seconds:g} s" if isinstance(err, TimeoutError) else err.strerror or str(err)
        raise UsageError(f"{where} cannot be reached ({reason}); {_WHAT_TO_CHECK[option]}") from err
    if option == "--job_endpoint":
        with grpc.insecure_channel(address) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=seconds)
            except grpc.FutureTimeoutError as err:
                raise UsageError(
                    f"{where} accepts connections but no gRPC server answered in {seconds:g} s; "
                    f"{_WHAT_TO_CHECK[option]}"
                ) from err


def _connect(host_port: tuple[str, int], seconds: float) -> None:
    """A TCP connection opened and closed, name lookup included, in ``seconds`` at most (TimeoutError):
    ``socket.create_connection`` bounds the connection only, and a lookup whose DNS server does not answer
    waits for the resolver's own retries. The lookup runs in a daemon thread, left behind if it is late."""
    started = time.monotonic()
    found: list[Any] = []

    def lookup() -> None:
        try:
            found.append(socket.getaddrinfo(*host_port, type=socket.SOCK_STREAM))
        except OSError as err:
            found.append(err)

    thread = threading.Thread(target=lookup, name="zerda-endpoint-lookup", daemon=True)
    thread.start()
    thread.join(seconds)
    if not found:
        raise TimeoutError(f"no address for {host_port[0]} in {seconds:g} s")
    if isinstance(found[0], OSError):
        raise found[0]
    error: OSError = OSError(f"no address for {host_port[0]}")
    for family, kind, proto, _, address in found[0]:  # each in turn, as create_connection does (IPv6, then IPv4)
        left = seconds - (time.monotonic() - started)
        if left <= 0:
            raise TimeoutError(f"no answer from {host_port[0]} in {seconds:g} s")
        try:  # a family the kernel lacks (IPv6 turned off) fails at socket(): the next address is tried
            with socket.socket(family, kind, proto) as connection:
                connection.settimeout(left)
                connection.connect(address)
                return
        except OSError as err:
            error = err
    raise error


def _host_port(address: str, default_port: int | None) -> tuple[str, int] | None:
    """Host and port of ``host:port`` or ``http(s)://host[:port][/path]``; None when it is another form."""
    parts = urlsplit(address if "://" in address else f"//{address}")
    if parts.scheme not in ("", "http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else default_port)
    except ValueError:  # not a port number: Beam will say so
        return None
    return (parts.hostname, port) if port else None


def job_failure(err: Exception, runner: PipelineRunner, options: PipelineOptions) -> str:
    """One line for a job a non-local runner could not start or run (the launcher's traceback shows nothing more)."""
    target = endpoint(runner, options)
    where = f" ({target[0]} {target[1]})" if target else ""
    if isinstance(err, grpc.Call):  # a gRPC error's text is a multi-line dump of the call
        code = err.code()
        hint = " (no Beam job service there?)" if code == grpc.StatusCode.UNIMPLEMENTED else ""
        detail = f"the job service answered {code.name}{hint}: {err.details()}"
    else:
        detail = f"the job failed: {_failure(str(err)) or type(err).__name__}"
    return f"{type(runner).__name__}{where}: {bounded(detail, _DETAIL_CHARS)}"


def _failure(text: str) -> str:
    """A failed job's message on one line. A worker's failure arrives as its Python traceback (kilobytes; on
    Flink inside a Java exception, its frames after it): the line before the traceback, then the exception
    that ended the last one, which the first characters of the traceback would not reach."""
    head, marker, tail = text.partition(_TRACEBACK)
    if not marker:
        return " ".join(text.split())
    _, _, last = tail.rpartition(_TRACEBACK)
    cause = next((line for line in last.splitlines() if line.strip() and not line[0].isspace()), "")
    head = bounded(" ".join(head.split()).rstrip(":"), _HEAD_CHARS)
    return f"{head}{' ' if head.endswith('.') else ': '}{' '.join(cause.split())}" if cause else head
