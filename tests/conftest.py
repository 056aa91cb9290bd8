import os
import signal

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# A shell without job control starts background commands (`cmd &`, `nohup cmd &` in a
# script) with SIGINT ignored, and every process they start inherits that: the tests that
# stop a run with SIGINT (Ctrl-C) would then see it ignored and the run finish (exit 0).
# The suite restores Python's default so it means the same however CI launched it; its
# children (actorq subprocesses) then start with SIGINT's default action.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
  signal.signal(signal.SIGINT, signal.default_int_handler)

# Tests marked `isolated` run in a child pytest process (a native crash fails that test only).
# pylint: disable-next=unused-import,wrong-import-position
from actorq.testing.isolated import pytest_configure, pytest_runtest_protocol
# Under pytest-xdist, files with `slow` tests are handed out first (testing/ordering.py).
# pylint: disable-next=unused-import,wrong-import-position
from actorq.testing.ordering import pytest_collection_modifyitems
