#!/usr/bin/env bash
# Builds the book (mkdocs.yml: docs/, README.md as its front page,
# ARCHITECTURE.md) into target/book, and fails on a link to a page or a file
# that is not there, an anchor that is not there, or a page that no chapter
# of mkdocs.yml's nav lists (mkdocs build --strict with its `validation:`
# settings, and scripts/book_hooks.py for the links that leave the book).
# Before the book, scripts/book_test.py shows that each of those fails a
# build. Why mkdocs and not mdBook: docs/book.md.
#
#   scripts/book.sh            (scripts/test.sh runs it with the style checks)
#
# Needs python3 with pip. mkdocs and what it needs, pinned in
# scripts/book-requirements.txt, are installed once (a few seconds) into
# ${NODESTATUS_CACHE:-~/.cache/nodestatus}/toolchains/book.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }

requirements=scripts/book-requirements.txt
toolchain="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}/toolchains/book"
venv="$toolchain/venv"
site="$toolchain/site"
# A new pin is a new install.
stamp="$toolchain/$(sha256sum "$requirements" | cut -c1-16).ok"

# The venv's python, or python3 over the --target install when python3 has
# no venv module (Debian without python3-venv).
py() {
  if [ -x "$venv/bin/python" ]; then
    "$venv/bin/python" "$@"
  else
    PYTHONPATH="$site" python3 "$@"
  fi
}

mkdocs_version="$(sed -n 's/^mkdocs==//p' "$requirements")"
echo "== toolchain: mkdocs $mkdocs_version ($toolchain)"
if [ ! -f "$stamp" ]; then
  rm -rf "$toolchain"
  mkdir -p "$toolchain"
  if python3 -m venv "$venv" >/dev/null 2>&1; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  else
    rm -rf "$venv"
    echo "   (python3 -m venv is unavailable; installing with pip --target)"
    python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" -r "$requirements"
  fi
  py -m mkdocs --version | grep -qF "version $mkdocs_version "
  touch "$stamp"
fi

export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the checkout
echo "== test: the book's checks (scripts/book_test.py)"
py -m unittest -q scripts/book_test.py
echo "== book: target/book"
py -m mkdocs build --strict
