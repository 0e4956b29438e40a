"""Tests of scripts/ensure-devnull.sh: a plain file in /dev/null's place
becomes the null device; the null device is left as it is."""

import os
import stat
import subprocess
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ensure-devnull.sh")


def run(path):
    return subprocess.run([SCRIPT, path], capture_output=True, text=True)


class EnsureDevNull(unittest.TestCase):
    @unittest.skipUnless(os.geteuid() == 0, "mknod needs root")
    def test_a_plain_file_becomes_the_null_device(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "null")
            with open(path, "w") as f:
                f.write("  = note: `#[warn(dead_code)]` on by default\n")
            result = run(path)
            self.assertEqual(result.returncode, 0, result.stderr)
            st = os.stat(path)
            self.assertTrue(stat.S_ISCHR(st.st_mode))
            self.assertEqual((os.major(st.st_rdev), os.minor(st.st_rdev)), (1, 3))
            self.assertEqual(os.listdir(d), ["null"])
            try:
                with open(path, "w") as f:
                    f.write("gone")
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), b"")
            except PermissionError:
                pass  # a temp filesystem mounted nodev: the node is right, it cannot be opened there

    def test_the_null_device_is_left_alone(self):
        before = os.stat("/dev/null")
        if not stat.S_ISCHR(before.st_mode):
            self.skipTest("this machine's /dev/null is not a device")
        result = run("/dev/null")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(os.stat("/dev/null").st_ino, before.st_ino)
        self.assertEqual(result.stderr, "")

    def test_a_directory_it_cannot_write_says_why(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "missing-dir", "null")
            result = run(path)
            self.assertEqual(result.returncode, 1)
            self.assertIn("could not be made one", result.stderr)


if __name__ == "__main__":
    unittest.main()
