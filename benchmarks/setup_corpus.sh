#!/usr/bin/env bash
# Installs the Debian documentation packages the chunker benchmark reads, then caches their text
# in benchmarks/.corpus/ (gitignored). Safe to re-run: installs nothing when the docs are present.
#
#   python3-doc      -> python-docs : the Python manual's reStructuredText sources (~11 MB, English)
#   debian-handbook  -> handbook-ar : the Arabic (ar-MA) Debian Administrator's Handbook, HTML -> text
#                       (bench_retrieval.py reads its en-US and ar-MA pages, and the Python manual, in place)
#
# Exit status: 0 when at least one corpus was prepared, 2 when packages could not be installed.
# Set PYTHON to choose the interpreter that extracts the text (default: python3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
packages=(python3-doc debian-handbook)

docs_present() {
  compgen -G "/usr/share/doc/python3*/html/_sources" >/dev/null &&
    [ -d /usr/share/doc/debian-handbook/html/ar-MA ]
}

known_to_apt() {
  # A package is installable when apt has a candidate version for it; otherwise the lists need an update.
  local pkg
  for pkg in "${packages[@]}"; do
    apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [^(]' || return 1
  done
}

install_packages() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup_corpus: apt-get not found: install ${packages[*]} by hand, or run the benchmark on the synthetic corpus only" >&2
    return 2
  fi
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "setup_corpus: not root and no sudo: cannot apt-get install ${packages[*]}" >&2
      return 2
    fi
    sudo=(sudo -n)
  fi
  if ! known_to_apt; then
    echo "setup_corpus: apt-get update (package lists do not know ${packages[*]} yet)"
    "${sudo[@]}" apt-get update -q || { echo "setup_corpus: apt-get update failed" >&2; return 2; }
  fi
  echo "setup_corpus: apt-get install ${packages[*]}"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${packages[@]}" ||
    { echo "setup_corpus: apt-get install failed" >&2; return 2; }
  if ! docs_present; then
    # Slim images often drop /usr/share/doc through a dpkg path-exclude rule.
    echo "setup_corpus: packages installed but their files are missing; check /etc/dpkg/dpkg.cfg.d for path-exclude" >&2
    return 2
  fi
}

if ! docs_present; then
  install_packages || exit $?
fi
# Run from the repo root so that `benchmarks` imports as a package.
cd "$here/.."
exec "$python" -m benchmarks.corpus --prepare
