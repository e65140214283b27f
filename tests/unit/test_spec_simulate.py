"""spec/simulate.py: the environment switch that stock workers read when they are built."""
from __future__ import annotations

import pytest

from specpilot.spec import simulate


@pytest.mark.parametrize("before", [None, "2.5"])
def test_simulated_acceptance_sets_and_restores(monkeypatch, before):
    if before is None:
        monkeypatch.delenv(simulate.ENV, raising=False)
    else:
        monkeypatch.setenv(simulate.ENV, before)
    with simulate.simulated_acceptance(4.8):
        assert simulate.SimulatedAcceptance.from_env().mean == 4.8
    assert simulate.os.environ.get(simulate.ENV) == before
    with simulate.simulated_acceptance(None):   # None: left as it was
        assert simulate.os.environ.get(simulate.ENV) == before
    with pytest.raises(RuntimeError):           # restored on an error too
        with simulate.simulated_acceptance(6.5):
            raise RuntimeError("build failed")
    assert simulate.os.environ.get(simulate.ENV) == before
