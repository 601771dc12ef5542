"""Fixtures of the unit tests."""

from tests.support.fake_api import api  # noqa: F401 - the stand-in API of the ops commands
