"""mkdocs hooks of the book (mkdocs.yml, built by scripts/book.sh).

The book is docs/ plus two files that live at the repository's root and are
read there (GitHub shows them first): README.md is the book's front page and
ARCHITECTURE.md its contributor chapter. Each is written once, where it is;
this hook adds them to the book as they are.

Every page's links are written for the repository (as GitHub renders them):
relative to the file's own place. The hook resolves each against the page's
place in the repository:
- a link to a page of the book (docs/, README.md, ARCHITECTURE.md) becomes
  the link between the two pages in the book, which mkdocs then checks
  (the page, and its anchor: `validation:` in mkdocs.yml);
- a link to any other file of the repository (wit/plugin.wit, sdk/) must
  name a file or folder that exists, and becomes a link to it on the
  repository's site (`repo_url`);
- a link to a file that does not exist is an error, and fails the build.
Headings get GitHub's anchors (`gh_slug`), so one link works in both places.
"""

import logging
import os
import posixpath
import re

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.plugins.nodestatus")

# Pages from outside docs/: their path in the repository, their path in the book.
OUTSIDE = {"README.md": "index.md", "ARCHITECTURE.md": "architecture.md"}

LINK = re.compile(r"(!?\[(?:[^\[\]]|\[[^\]]*\])*\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")
FENCE = re.compile(r"^\s*(```|~~~)")


def gh_slug(value, separator="-"):
    """GitHub's anchor for a heading: lower case, everything but letters,
    digits, spaces, `-` and `_` dropped, each space a `-` (none merged)."""
    value = re.sub(r"[^\w\- ]", "", value.strip().lower())
    return value.replace(" ", separator)


def origin_of(book_path):
    """The page's path in the repository, from its path in the book."""
    for repo_path, path in OUTSIDE.items():
        if path == book_path:
            return repo_path
    return posixpath.join("docs", book_path)


def book_path_of(repo_path):
    """The path in the book of a repository file, or None when the book does
    not hold it."""
    if repo_path in OUTSIDE:
        return OUTSIDE[repo_path]
    if repo_path.startswith("docs/"):
        return repo_path[len("docs/"):]
    return None


def rewrite(markdown, book_path, root, repo_url=""):
    """The page's markdown with its links resolved (module docstring), and
    the errors: one line per link to nothing."""
    origin = origin_of(book_path)
    here = posixpath.dirname(origin)
    errors = []

    def one(m):
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            return m.group(0)  # a URL, a mail address, or an anchor of this page
        if target.startswith("/"):
            errors.append(f"{origin}: {target}: an absolute path; link relative to this file")
            return m.group(0)
        path, sep, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(here, path))
        if repo_path.startswith("../") or repo_path == "..":
            errors.append(f"{origin}: {target}: outside the repository")
            return m.group(0)
        full = os.path.join(root, repo_path)
        in_book = book_path_of(repo_path)
        if in_book is not None and os.path.isfile(full):
            new = posixpath.relpath(in_book, posixpath.dirname(book_path) or ".")
            return m.group(1) + new + sep + anchor + m.group(3)
        if not os.path.exists(full):
            errors.append(f"{origin}: {target}: no such file in the repository ({repo_path})")
            return m.group(0)
        if sep:
            errors.append(f"{origin}: {target}: an anchor in a file outside the book")
        kind = "tree" if os.path.isdir(full) else "blob"
        return m.group(1) + f"{repo_url.rstrip('/')}/{kind}/main/{repo_path}" + m.group(3)

    def outside_code(chunk):
        # A match after an odd number of backticks in its paragraph is
        # inside a code span.
        def keep_code(m):
            start = chunk.rfind("\n\n", 0, m.start()) + 1
            return m.group(0) if chunk.count("`", start, m.start()) % 2 else one(m)

        return LINK.sub(keep_code, chunk)

    # Links outside fenced blocks only; a link's text may span lines.
    out, prose, fenced = [], [], False
    for line in markdown.split("\n"):
        if FENCE.match(line) or fenced:
            if prose:
                out.append(outside_code("\n".join(prose)))
                prose = []
            if FENCE.match(line):
                fenced = not fenced
            out.append(line)
        else:
            prose.append(line)
    if prose:
        out.append(outside_code("\n".join(prose)))
    return "\n".join(out), errors


def on_config(config):
    config.mdx_configs.setdefault("toc", {})["slugify"] = gh_slug
    if "toc" not in config.markdown_extensions:
        config.markdown_extensions.append("toc")
    return config


def repo_root(config):
    """The repository: the folder that holds docs/."""
    return os.path.dirname(os.path.abspath(config.docs_dir))


def on_files(files, config):
    for repo_path, book_path in OUTSIDE.items():
        with open(os.path.join(repo_root(config), repo_path), encoding="utf-8") as f:
            files.append(File.generated(config, book_path, content=f.read()))
    return files


def on_page_markdown(markdown, page, config, files):
    markdown, errors = rewrite(markdown, page.file.src_uri, repo_root(config), config.repo_url or "")
    for e in errors:
        log.warning(e)  # mkdocs build --strict fails on it
    return markdown
