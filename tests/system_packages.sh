#!/bin/sh
# The Debian packages the tests need, installed when missing, so that `make test` passes on a fresh machine:
#   chromium         renders the HTML report in a test (tests/test_report.py);
#   debian-handbook  the English and Arabic pages the density tests compare (tests/debian_texts.py);
#   java and mvn     run the Flink cluster and fetch Beam's job server jars (tests/flink_cluster.py), and
#                    the Iceberg REST catalog server (tests/iceberg_rest_server.py);
#   postgresql       the PostgreSQL server an Iceberg catalog is tested against (tests/postgres_server.py).
# Needs root (or sudo) and apt-get; otherwise names the packages and stops, since the tests would fail.
set -eu
need=""
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need="$need chromium"
[ -d /usr/share/doc/debian-handbook/html/ar-MA ] || need="$need debian-handbook"
command -v java >/dev/null 2>&1 || need="$need openjdk-17-jre-headless"
command -v mvn >/dev/null 2>&1 || need="$need maven"
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need="$need postgresql"
[ -z "$need" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; else sudo="none"; fi
if [ "$sudo" = none ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "the tests need these Debian packages:$need (apt-get install -y$need as root)" >&2
    exit 1
fi
echo "installing the Debian packages the tests need:$need" >&2
$sudo apt-get update -qq
# shellcheck disable=SC2086  # one word a package
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
