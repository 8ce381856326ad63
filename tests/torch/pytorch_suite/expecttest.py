"""A stand-in for the `expecttest` package (not in Debian 12), which torch's
test utilities import: its TestCase and ACCEPT flag.  The distributed
suite never records expected output, so comparing the strings is enough."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertMultiLineEqual(str(expect).strip(), str(actual).strip())

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        with self.assertRaises(exc_type) as cm:
            callable(*args, **kwargs)
        self.assertExpectedInline(str(cm.exception), expect)
