"""S3 over real HTTP for tests: moto's server on 127.0.0.1, reached through the ordinary AWS environment.

Import the fixtures into a test module (``from tests.s3_server import moto_endpoint, s3_env  # noqa: F401``):

- ``moto_endpoint`` (session): a ``ThreadedMotoServer`` on a free port; yields its ``http://`` URL.
- ``s3_env`` (module): points ``AWS_ENDPOINT_URL`` at it with fake credentials, hides any real AWS
  configuration, and clears fsspec's cached S3 filesystems before and after, so that no filesystem
  built for another endpoint (or another module's environment) is reused. Yields an :class:`S3Env`.

zerda itself is given no endpoint or credentials: s3fs and boto3 find them in the environment, as they
would on a real deployment.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
import s3fs
from moto.server import ThreadedMotoServer

REGION = "us-east-1"

# Environment variables that could send a test to real AWS or change how the fake one is reached.
_HIDDEN = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "FSSPEC_S3",
    "FSSPEC_S3_ENDPOINT_URL",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
)


@dataclass(frozen=True)
class S3Env:
    """The fake S3 a test talks to."""

    endpoint: str

    def client(self) -> Any:
        """A boto3 S3 client, configured from the environment only."""
        return boto3.client("s3")

    def new_bucket(self, prefix: str = "zerda-test") -> str:
        """Create a bucket with a unique name (buckets outlive a module: the server is per session)."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def filesystem(self) -> s3fs.S3FileSystem:
        """A fresh s3fs filesystem, configured from the environment only."""
        return s3fs.S3FileSystem(skip_instance_cache=True)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 and a free port, for the whole session."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3_env(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Env]:
    """The AWS environment pointed at the moto server; real AWS configuration hidden."""
    no_config = tmp_path_factory.mktemp("aws") / "absent"
    with pytest.MonkeyPatch.context() as env:
        for name in _HIDDEN:
            env.delenv(name, raising=False)
        env.setenv("AWS_ENDPOINT_URL", moto_endpoint)
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv("AWS_DEFAULT_REGION", REGION)
        env.setenv("AWS_CONFIG_FILE", str(no_config))
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(no_config))
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        env.setenv("NO_PROXY", "127.0.0.1,localhost")
        s3fs.S3FileSystem.clear_instance_cache()
        try:
            yield S3Env(moto_endpoint)
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
