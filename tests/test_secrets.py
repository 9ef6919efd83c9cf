"""Issue 24: credentials never leave the process. Signed URLs' query strings (AWS, Google, Azure SAS, API keys,
OAuth tokens) and Beam's storage options given on the command line reach no output stream of any process and
no byte of any committed file.

The corpus is served by moto's S3 server over real HTTP and read through signed URLs (a real presigned GET,
extended with the fields of other signing schemes, which moto ignores). The job runs through the real CLI in a
subprocess, in memory and with two worker processes, with ``--verbose`` (botocore's, fsspec's and Beam's debug
logs, Beam's workers' ``Pipeline_options`` line). Then stdout, stderr and every file under OUTPUT are searched
for each secret: raw bytes, and every string of every Parquet file (values and metadata), decompressed.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import boto3
import pyarrow.parquet as pq
import pytest
from botocore.config import Config

from pipelines import redact
from tests.common import MULTI_PROCESS, REPO

pytest_plugins = ["tests.s3_server"]  # moto_endpoint

PROSE = "The river rises in the hills and runs to the sea. Farmers use its water in summer. " * 3

# Fields of signed URLs by scheme, each with a value of its own (mixed case: a message that lower-cases a
# name, as a file-type error did, must not leak it either).
EXTRA_FIELDS = {
    "azure": {"sv": "2021-08-06", "sp": "r", "se": "2030-01-01T00:00Z", "sig": "AzSasSig0Secret+Value/1"},
    "google": {"X-Goog-Credential": "zerda-sa@Proj0Secret2.iam", "X-Goog-Signature": "GoogSig0Secret3abcdef"},
    "oauth": {"access_token": "Ya29OauthSecret4Token", "token": "PlainTokenSecret5xyz"},
    "apikey": {"api_key": "ApiKeySecret6abcdef", "key": "AIzaGoogleKeySecret7"},
    "basic": {"password": "PassWordSecret8abc", "secret": "ClientSecret9abcdef"},
}
KEY_ID, SECRET_KEY, SESSION_TOKEN = "AKIAZERDASIGNER00042", "SignerSecretKey/0123456789abcdXYZ", "SignerSessionTok0123"
OPTIONS = {
    "--s3_access_key_id": "AKIAZERDAOPTION00043",
    "--s3_secret_access_key": "OptionSecretAccessKey/987654321zyx",
    "--s3_session_token": "OptionSessionToken0Secret10",
    "--azure_connection_string": "DefaultEndpointsProtocol=https;AccountName=zerda;AccountKey=AzAccountKey0Secret11==",
}
OPTION_SECRETS = [*list(OPTIONS.values())[:3], "AzAccountKey0Secret11"]


def presign(endpoint: str, bucket: str, key: str) -> str:
    """A real SigV4 presigned GET of ``key``, made with a temporary credential (so it carries a security token)."""
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET_KEY,
        aws_session_token=SESSION_TOKEN,
        config=Config(signature_version="s3v4"),
    )
    return client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=3600)


def query_secrets(url: str) -> list[str]:
    """The values of a signed URL's credential fields (the signature, the credential, the token, ...)."""
    public = {"X-Amz-Algorithm", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "sv", "sp", "se"}
    return [value for name, value in parse_qsl(urlsplit(url).query) if name not in public]


@pytest.fixture(scope="module")
def signed_corpus(moto_endpoint: str) -> Iterator[tuple[list[str], list[str]]]:
    """(signed URLs of the corpus files, every secret value they hold). Good documents, a broken JSON line, an
    empty file, a file of an unknown type and a damaged gzip: rows in chunks and rejects, messages in rejects."""
    admin = boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    bucket = f"zerda-secrets-{int(time.time() * 1000) % 10**9}"
    admin.create_bucket(Bucket=bucket)
    files = {
        "corpus/a.jsonl": (json.dumps({"text": PROSE}) + "\n{broken\n" + json.dumps({"text": PROSE[::-1]})).encode(),
        "corpus/b.txt": PROSE.encode(),
        "corpus/c.md": ("# River\n\n" + PROSE).encode(),
        "corpus/d.jsonl": b"",
        "corpus/e.bin": b"\x00\x01binary",
        "corpus/f.jsonl.gz": gzip.compress(json.dumps({"text": PROSE}).encode())[:-12],
        "corpus/g.jsonl": (json.dumps({"text": PROSE, "id": "g1"}) + "\n").encode(),
    }
    urls = []
    for (key, body), extra in zip(files.items(), [{}, *EXTRA_FIELDS.values(), {}], strict=True):
        admin.put_object(Bucket=bucket, Key=key, Body=body)
        url = presign(moto_endpoint, bucket, key)
        urls.append(url + "".join(f"&{name}={value}" for name, value in extra.items()))
    secrets = sorted({value for url in urls for value in query_secrets(url)} | {KEY_ID, SECRET_KEY, SESSION_TOKEN})
    assert len(secrets) >= 13 and any("Signature" in url for url in urls)
    yield urls, secrets


def strings_of_parquet(path: Path) -> Iterator[str]:
    """Every string a Parquet file holds once decompressed: its values, schema and metadata."""
    table = pq.read_table(path)
    yield str(table.schema)
    yield json.dumps(table.to_pylist(), default=str, ensure_ascii=False)
    yield str(pq.read_metadata(path).metadata)


def everything_stored(output: Path) -> str:
    """Every byte of every file under OUTPUT as text, Parquet files decompressed too."""
    parts = []
    for path in sorted(p for p in output.rglob("*") if p.is_file()):
        parts.append(path.name)
        parts.append(path.read_bytes().decode("utf-8", "replace"))
        if path.suffix in (".parquet", ".pq"):
            parts.extend(strings_of_parquet(path))
    return "\n".join(parts)


def assert_no_secret(where: str, text: str, secrets: list[str]) -> None:
    for secret in secrets:
        for form in {secret, secret.lower()}:
            at = text.find(form)
            assert at < 0, f"{secret} leaked into {where}: ...{text[max(0, at - 300) : at + 100]}"


def cli(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli.rechunk", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_signed_urls_and_secret_options_reach_no_stream_and_no_committed_file(
    mode: str, signed_corpus: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    urls, secrets = signed_corpus
    output = tmp_path / "out"
    argv = [arg for url in urls for arg in ("--input", url)] + ["--output", str(output), "--verbose"]
    argv += [arg for option, value in OPTIONS.items() for arg in (option, value)]
    run = cli(argv + (MULTI_PROCESS if mode == "multi_processing" else []))
    assert run.returncode == 0, run.stderr[-3000:]
    logged = run.stdout + run.stderr
    # the secrets were there to leak: debug logs of requests, Beam's options, the workers' lines
    assert "botocore" in logged or "fsspec" in logged, logged[-2000:]
    if mode == "multi_processing":  # each worker logs its options, and the launcher relays the line
        assert logged.count("Pipeline_options") >= 4 and "'s3_secret_access_key': '***'" in logged
    assert_no_secret("stdout/stderr", logged, secrets + OPTION_SECRETS)
    stored = everything_stored(output)
    manifest = json.loads((output / "_manifest.json").read_text(encoding="utf-8"))
    chunks = pq.read_table(output, partitioning="hive").to_pylist()
    rejects = pq.read_table(output / "_rejects").to_pylist()
    # every kind of file was written and read back: chunks from signed URLs, rejects of each kind, the index
    assert {row["source"].split("?")[0].rsplit("/", 1)[-1] for row in chunks} >= {"a.jsonl", "b.txt", "c.md"}
    assert {r["reason"] for r in rejects} >= {"invalid_json", "empty", "not_text", "unreadable_file"}
    assert all("X-Amz-Signature=***" in row["source"] for row in chunks + rejects)
    assert manifest["counts"]["files_read"] == len(urls) and any((output / "_index").iterdir())
    assert_no_secret("OUTPUT", stored, secrets + OPTION_SECRETS)


def test_a_signed_url_that_matches_nothing_is_one_line_without_its_secrets(
    signed_corpus: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    urls, secrets = signed_corpus
    missing = urls[0].replace("/corpus/a.jsonl?", "/corpus/gone.jsonl?")
    run = cli(["--input", missing, "--output", str(tmp_path / "out"), "--verbose"])
    assert run.returncode == 2 and "zerda: error: input " in run.stderr, run.stderr[-2000:]
    assert_no_secret("stderr", run.stdout + run.stderr, secrets)


SECRET_KEY_OPTION = OPTIONS["--s3_secret_access_key"]


@pytest.mark.parametrize(
    ("argv", "secrets"),
    [
        (["--s3_secret_access_key", SECRET_KEY_OPTION, "--s3_secret_access_key=Other0Secret12abc"], ["Other0Secret12"]),
        (["--s3_session_token=sh0rt1", "--s3_session_token=sh0rt2"], ["sh0rt1", "sh0rt2"]),  # too short to remember
        (["--s3_secret_acess_key=" + SECRET_KEY_OPTION], []),  # misspelt: unknown, still named as a secret
        (["--azure_connection_string", OPTIONS["--azure_connection_string"], "--azure_connection_string=x"], []),
        (["--s3_access_key_id", OPTIONS["--s3_access_key_id"], "--runner", "NoSuchRunner"], []),
    ],
    ids=["twice", "twice-short", "misspelt", "connection-string", "bad-runner"],
)
def test_secret_options_are_never_echoed_by_a_refusal(argv: list[str], secrets: list[str], tmp_path: Path) -> None:
    run = cli(["--output", str(tmp_path / "out"), *argv])
    assert run.returncode == 2 and run.stderr.startswith("zerda: error: "), run.stderr[-2000:]
    assert_no_secret("stderr", run.stdout + run.stderr, secrets + OPTION_SECRETS)


def test_every_shape_of_a_credential_field_is_redacted() -> None:
    """The rule is by the field's name, in each spelling a message gives it; ordinary fields keep their values."""
    hidden = {
        "https://h/a.jsonl?X-Amz-Credential=AKIA1%2F2026&X-Amz-Signature=abc1234": ["AKIA1", "abc1234"],
        "not a corpus file type: .jsonl?x-amz-signature=abc1234&x-goog-signature=def5678": ["abc1234", "def5678"],
        "https://h/x?key=AIza99&sig=S1zz&subscription-key=sk12&auth=au12": ["AIza99", "S1zz", "sk12", "au12"],
        "{'s3_secret_access_key': 'ab/cd+e', 's3_access_key_id': 'AKIA2'}": ["ab/", "cd+e", "AKIA2"],
        "{'password': 'two words/x'}": ["two", "words", "/x"],
        "https://h/a?sig=ab/cd%2B&token=ef/gh": ["ab/", "cd%2B", "ef/", "/gh"],
        r"message: \"{\'s3_session_token\': \'tok999\'}\"": ["tok999"],
        "--s3_secret_access_key=sek123 --azure_connection_string=x;AccountKey=ak12==": ["sek123", "ak12"],
        "{'Authorization': b'AWS4-HMAC-SHA256 Credential=AKIA3/x, Signature=si99'}": ["AKIA3", "si99"],
        "Authorization: Bearer eyJhb.eyJzd.SflKx": ["eyJhb"],
        '{"client_secret": "cs123", "refresh_token": "rt123", "db_password": "pw123"}': ["cs123", "rt123", "pw123"],
    }
    for text, secrets in hidden.items():
        assert not [s for s in secrets if s in redact.redact_url(text)], (text, redact.redact_url(text))
    kept = "tokenizer: package:x size_unit: tokens; key: value; https://h/a.jsonl?version=3&partNumber=2 Error: gone"
    kept += " /data/sig=1/a.jsonl /data/key=2/b.jsonl"  # Hive-style folders: names, not a query's fields
    assert redact.redact_url("/data/token=abc/x.jsonl") == "/data/token=***/x.jsonl"  # the folder's value only
    assert redact.redact_url(kept) == kept


def test_remembered_command_line_secrets_are_replaced_in_any_shape() -> None:
    value = "RememberedSecret0Value13"
    redact.remember_arguments(["--s3_secret_access_key", value, "--input", "https://h/a?sig=RememberedSig0Value14"])
    assert redact.redact_url(f"['--s3_secret_access_key', '{value}'] RememberedSig0Value14") == (
        "['--s3_secret_access_key', '***'] ***"
    )
    redact.remember_arguments(["--s3_session_token", "--output", "out/chunks"])  # a value missing: no secret
    assert redact.redact_url("--output out/chunks") == "--output out/chunks"


_ADVERSARIAL = """
from pipelines.redact import redact_url
n = 200_000
cases = ["-" * n, "a-" * (n // 2), "?a=" * (n // 3), "&sig=" * (n // 5), "a" * n + "=", "'a': '" * (n // 6),
         "\\\\'" * (n // 2), "Bearer " * (n // 7), "--x_token " * (n // 10), "a." * (n // 2) + ":"]
for case in cases:
    redact_url(case)
print("done", len(cases))
"""


def test_the_field_rule_runs_in_linear_time() -> None:
    run = subprocess.run([sys.executable, "-c", _ADVERSARIAL], capture_output=True, text=True, cwd=REPO, timeout=30)
    assert run.stdout.strip() == "done 10", run.stderr[-2000:]
