"""Tests of the book's checks (scripts/book.sh runs them before the book).

Each builds a small repository (a README.md, an ARCHITECTURE.md, docs/)
with mkdocs.yml's own `validation:` settings and hook, once clean and once
with one defect each: a link to a page that is not there, an anchor that is
not there, a page that no chapter lists, a link to a repository file that is
not there. The clean one must build and each broken one must fail, naming
the defect. The hook's link resolution is tested on its own below.

    python3 -m unittest scripts/book_test.py   (with mkdocs importable)
"""

import os
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import book_hooks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def real_config():
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


CLEAN = {
    "README.md": "# Front\n\nSee [the guide](docs/guide.md#step-2-build-it), "
    "[the WIT](wit/plugin.wit) and [the design](ARCHITECTURE.md).\n",
    "ARCHITECTURE.md": "# Design\n\nBack to [the guide](docs/guide.md).\n",
    "docs/guide.md": "# Guide\n\n## Step 2: build it\n\n[front](../README.md), "
    "[the reference](reference/keys.md#nodename)\n",
    "docs/reference/keys.md": "# Keys\n\n## nodeName\n\nx\n",
    "wit/plugin.wit": "package x:y;\n",
}
NAV = [
    {"Home": "index.md"},
    {"Guide": "guide.md"},
    {"Design": "architecture.md"},
    {"Reference": [{"Keys": "reference/keys.md"}]},
]


def build(files, nav=NAV):
    """Builds the book of `files`; returns (exit status, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        for path, text in files.items():
            full = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        real = real_config()
        config = {
            "site_name": "test",
            "repo_url": real["repo_url"],
            "docs_dir": "docs",
            "site_dir": os.path.join(tmp, "site"),
            "hooks": [os.path.join(ROOT, h) for h in real["hooks"]],
            "validation": real["validation"],
            "nav": nav,
        }
        with open(os.path.join(tmp, "mkdocs.yml"), "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f)
        run = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", os.path.join(tmp, "mkdocs.yml")],
            capture_output=True,
            text=True,
        )
        return run.returncode, run.stdout + run.stderr


def with_change(path, old, new):
    files = dict(CLEAN)
    assert old in files[path], (path, old)
    files[path] = files[path].replace(old, new)
    return files


# Each defect, the book that has it, and what the failure must say.
DEFECTS = [
    (
        "a link to a page that is not there",
        with_change("docs/guide.md", "reference/keys.md#nodename", "reference/gone.md"),
        "reference/gone.md",
    ),
    (
        "an anchor that is not there",
        with_change("docs/reference/keys.md", "## nodeName", "## nodeNames"),
        "does not contain an anchor '#nodename'",
    ),
    (
        "an anchor that is not there, from the front page",
        with_change("README.md", "#step-2-build-it", "#step-3"),
        "#step-3",
    ),
    ("a page that no chapter lists", dict(CLEAN, **{"docs/orphan.md": "# Orphan\n"}), "orphan.md"),
    (
        "a link to a repository file that is not there",
        with_change("README.md", "wit/plugin.wit", "wit/gone.wit"),
        "wit/gone.wit: no such file in the repository",
    ),
]


class Build(unittest.TestCase):
    def test_the_clean_book_builds(self):
        code, out = build(CLEAN)
        self.assertEqual(code, 0, out)

    def test_each_defect_fails_the_build_and_is_named(self):
        for name, files, says in DEFECTS:
            with self.subTest(name):
                code, out = build(files)
                self.assertNotEqual(code, 0, out)
                self.assertIn(says, out)


class Rewrite(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        for path in ["docs/a.md", "docs/reference/config.md", "sdk/lib.rs", "README.md", "ARCHITECTURE.md"]:
            full = os.path.join(self.tmp.name, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            open(full, "w").close()

    def tearDown(self):
        self.tmp.cleanup()

    def rewrite(self, text, page):
        return book_hooks.rewrite(text, page, self.tmp.name, "https://example.com/r")

    def assert_rewrites(self, page, text, expected):
        self.assertEqual(self.rewrite(text, page), (expected, []))

    def test_links_become_the_books_or_the_repositorys(self):
        url = "https://example.com/r"
        for page, text, expected in [
            # The front page's links to pages of the book.
            ("index.md", "[a](docs/a.md#x) [c](docs/reference/config.md) [d](ARCHITECTURE.md)",
             "[a](a.md#x) [c](reference/config.md) [d](architecture.md)"),
            # A nested page's, to the book and out of it.
            ("reference/config.md", "[a](../a.md) [r](../../README.md) [s](../../sdk/lib.rs)",
             f"[a](../a.md) [r](../index.md) [s]({url}/blob/main/sdk/lib.rs)"),
            # A link's text may span lines.
            ("index.md", "see [the\n  guide](docs/a.md) and `x`\n[s](sdk/lib.rs)",
             f"see [the\n  guide](a.md) and `x`\n[s]({url}/blob/main/sdk/lib.rs)"),
            # A folder is a tree.
            ("index.md", "[`sdk/`](sdk)", f"[`sdk/`]({url}/tree/main/sdk)"),
        ]:
            with self.subTest(text):
                self.assert_rewrites(page, text, expected)

    def test_code_urls_and_anchors_are_left_alone(self):
        text = "`[x](nothing)` [u](https://k8s.io) [h](#here)\n```\n[y](nothing)\n```"
        self.assert_rewrites("a.md", text, text)

    def test_each_link_to_nothing_is_an_error(self):
        _, errors = self.rewrite("[n](nothing.md) [o](../../outside) [p](/etc/x) [q](../sdk/lib.rs#L3)", "a.md")
        self.assertEqual(len(errors), 4, errors)

    def test_githubs_slugs(self):
        self.assertEqual(book_hooks.gh_slug("Tiered activation (issue 24): Winch first"), "tiered-activation-issue-24-winch-first")
        self.assertEqual(book_hooks.gh_slug("A / B"), "a--b")
        self.assertEqual(book_hooks.gh_slug("`nodestatus simulate`"), "nodestatus-simulate")


if __name__ == "__main__":
    unittest.main()
