"""The test tiers are marked, not guessed (tests/conftest.py): a fast-tier test that starts a child process or asks
for a real model fails with the one line that tells its author to mark it heavy; a heavy one may do both."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.conftest import pytest_runtest_setup

MARK_IT = r"but is not marked heavy: mark it heavy \(@pytest.mark.heavy, or pytestmark = pytest.mark.heavy"


def test_a_fast_test_cannot_start_a_process() -> None:
    with pytest.raises(pytest.fail.Exception, match=rf"starts a child process \(true --version\) {MARK_IT}"):
        subprocess.run(["true", "--version"], check=False)
    with pytest.raises(pytest.fail.Exception, match=rf"starts a child process \(true\) {MARK_IT}"):
        os.system("true")


def test_a_fast_test_cannot_ask_for_a_real_model() -> None:
    item = SimpleNamespace(nodeid="tests/x.py::test_y", fixturenames=["tmp_path", "smollm2_path"],
                           get_closest_marker=lambda name: None)
    with pytest.raises(pytest.fail.Exception, match=r"test_y uses the fixture smollm2_path, .*: mark it heavy"):
        pytest_runtest_setup(item)  # type: ignore[arg-type]


@pytest.mark.heavy  # a subprocess: the tier allows it
def test_a_heavy_test_may_start_a_process() -> None:
    done = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "ok"
