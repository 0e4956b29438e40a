"""Tests of scripts/import-cycles.py on small crates written here."""

import importlib.util
import os
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("import_cycles", os.path.join(HERE, "import-cycles.py"))
ic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ic)


def crate(files):
    root = tempfile.mkdtemp()
    for path, text in files.items():
        p = os.path.join(root, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(textwrap.dedent(text))
    return root


PARENT = """
    mod child;
    pub use child::Thing;
    pub struct Error;
    pub fn helper() {}
    pub fn run() { child::go(); }
"""


class ImportCycles(unittest.TestCase):
    def check(self, files, allow=None):
        problems, used = ic.check(crate(files), "c", allow or {})
        return problems, used

    def test_a_child_that_calls_its_parents_function_is_a_circle(self):
        problems, _ = self.check({"lib.rs": "mod p;", "p/mod.rs": PARENT,
                                  "p/child.rs": "use super::helper;\npub fn go() { helper() }\n"})
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("a circle of imports: p -> p::child", problems[0])
        self.assertIn("p::child -> p: helper", problems[0])
        self.assertIn("p -> p::child: go", problems[0])

    def test_nested_groups_are_read(self):
        problems, _ = self.check({"lib.rs": "mod p;", "p/mod.rs": PARENT,
                                  "p/child.rs": "use super::{Error, other::{x, y as z}, helper};\n",
                                  "p/other.rs": ""})
        self.assertTrue(any("p::child -> p: Error, helper" in p for p in problems), problems)

    def test_a_child_that_names_only_types_is_allowed_by_the_list_and_only_by_it(self):
        files = {"lib.rs": "mod p;", "p/mod.rs": PARENT,
                 "p/child.rs": "use super::Error;\npub fn go() -> Option<Error> { None }\n"}
        problems, _ = self.check(files)
        self.assertEqual(len(problems), 1, "not in the list: a circle")
        allow = {("c", "p::child", "p"): "the error type"}
        problems, used = self.check(files, allow)
        self.assertEqual(problems, [])
        self.assertEqual(used, set(allow))

    def test_the_list_does_not_excuse_a_function_a_glob_or_a_method_path(self):
        allow = {("c", "p::child", "p"): "the error type"}
        for child in ["use super::{Error, helper};\n", "use super::*;\n",
                      "pub fn go() { super::Error::new(); crate::p::helper(); }\n"]:
            problems, _ = self.check({"lib.rs": "mod p;", "p/mod.rs": PARENT, "p/child.rs": child}, allow)
            if "Error::new" in child:
                self.assertTrue(any("names helper" in p for p in problems), problems)
            else:
                self.assertTrue(any("is allowed for types only" in p for p in problems), (child, problems))

    def test_a_parents_reexport_and_test_modules_are_not_imports(self):
        problems, _ = self.check({
            "lib.rs": "mod p;",
            "p/mod.rs": "mod child;\npub use child::Thing;\npub fn helper() {}\n",
            "p/child.rs": "pub struct Thing;\n#[cfg(test)]\nmod cause_tests {\n    use super::super::*;\n    fn t() { helper() }\n}\n",
        })
        self.assertEqual(problems, [])

    def test_siblings_in_a_circle_are_reported(self):
        problems, _ = self.check({"lib.rs": "mod a;\nmod b;", "a.rs": "use crate::b::f;\npub fn g() {}\n",
                                  "b.rs": "pub fn f() { crate::a::g() }\n"})
        self.assertEqual(problems, ["c: a circle of imports: a -> b"])


if __name__ == "__main__":
    unittest.main()
