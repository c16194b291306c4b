"""jitgrad/gil_turns.py: a short switch interval inside the block, the one found by the
first block in restored by the last one out, whatever the nesting, the threads or an
exception; never a longer one than was set."""
import sys
import threading

import pytest

from jitgrad import gil_turns


@pytest.fixture
def interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.004)
    yield 0.004
    sys.setswitchinterval(before)


def test_short_inside_restored_after_even_on_error(interval):
    with gil_turns.short():
        assert sys.getswitchinterval() == pytest.approx(gil_turns.GIL_TURN)
    assert sys.getswitchinterval() == pytest.approx(interval)
    with pytest.raises(KeyError):
        with gil_turns.short():
            raise KeyError("x")
    assert sys.getswitchinterval() == pytest.approx(interval)


def test_nested_and_concurrent_blocks_restore_once_all_are_out(interval):
    inside, release = threading.Event(), threading.Event()

    def other():
        with gil_turns.short():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other)
    with gil_turns.short():
        t.start()
        assert inside.wait(10)
        with gil_turns.short():
            pass
        assert sys.getswitchinterval() == pytest.approx(gil_turns.GIL_TURN)
    assert sys.getswitchinterval() == pytest.approx(gil_turns.GIL_TURN)   # the other block is still in
    release.set()
    t.join(10)
    assert sys.getswitchinterval() == pytest.approx(interval)


def test_never_longer_than_the_interval_set():
    before = sys.getswitchinterval()
    sys.setswitchinterval(gil_turns.GIL_TURN / 4)
    try:
        with gil_turns.short():
            assert sys.getswitchinterval() == pytest.approx(gil_turns.GIL_TURN / 4, abs=2e-6)   # kept in whole microseconds
    finally:
        sys.setswitchinterval(before)


def test_an_interval_the_program_sets_inside_the_block_stays(interval):
    """sys.setswitchinterval is process-wide: a program (another thread, say) that sets
    its own interval while a compile's block is open keeps it -- the block's exit does
    not put back the one it found."""
    with gil_turns.short():
        sys.setswitchinterval(0.01)
    assert sys.getswitchinterval() == pytest.approx(0.01)
    sys.setswitchinterval(interval)
    with gil_turns.short():
        with gil_turns.short():
            sys.setswitchinterval(0.02)
        assert sys.getswitchinterval() == pytest.approx(0.02)
    assert sys.getswitchinterval() == pytest.approx(0.02)
