import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# Tests marked `isolated` run in a child pytest process (a native crash fails that test only).
# pylint: disable-next=unused-import,wrong-import-position
from actorq.testing.isolated import pytest_configure, pytest_runtest_protocol
# Under pytest-xdist, files with `slow` tests are handed out first (testing/ordering.py).
# pylint: disable-next=unused-import,wrong-import-position
from actorq.testing.ordering import pytest_collection_modifyitems
