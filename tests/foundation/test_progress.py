"""The counts a long command's output shows, as its watcher receives them, and the throttle on notes."""

from __future__ import annotations

from crossbuild.foundation.progress import Note, Watch


def _watched() -> tuple[Watch, list[Note]]:
    got: list[Note] = []
    return Watch(sink=got.append), got


def test_the_counts_build_and_test_tools_print_are_read_across_chunks():
    watch, got = _watched()
    read = watch.counter("build")
    read(b"[1/120] Building C object a.o\n[2/1")  # ninja; the line split across two reads
    read(b"20] Building C object b.o\n")
    assert [(n.done, n.total) for n in got] == [(1, 120)]  # the second within the same second: throttled
    watch._last = ("", 0.0)
    read(b"[ 45%] Building C object c.o\n")  # CMake's makefiles
    read(b"garbage 3/4 not at the start\n")
    assert [(n.done, n.total) for n in got][-1] == (45, 100)
    watch._last = ("", 0.0)
    read(b"  7/25 Test  #7: parse ...........   Passed    0.01 sec\n")  # CTest
    assert got[-1] == Note("build", 7, 25) and got[-1].text() == "build: 7 of 25"
    read(b"25/25 Test #25: last ... Passed\n")  # the last count always goes through
    assert got[-1].text() == "build: 25 of 25"
    read(b"[9/3] impossible\n[ 300%] impossible\n")
    read(b"[1/" + b"9" * 5000 + b"]\n")  # past int()'s digit limit: not a count, and no exception
    assert got[-1].text() == "build: 25 of 25"


def test_a_new_phase_always_goes_through_and_a_failing_sink_breaks_nothing():
    watch, got = _watched()
    watch.note("configure")
    watch.note("build")
    watch.note("build")  # the same phase again within a second
    assert [n.message for n in got] == ["configure", "build"]

    def gone(_: Note) -> None:
        raise BrokenPipeError("the client went away")

    watch.sink = gone
    watch.note("verify")  # does not raise
    watch.sink = None
    watch.note("nothing watches")
    watch.counter("x")(b"[1/2] a\n")


def test_a_make_that_prints_no_count_is_noted_every_few_seconds_with_what_it_compiled(monkeypatch):
    """A model's 211 s `make` of an automake project sent one note at its start and none for 208 s: clients time
    out calls that say nothing. Silent rules and compiler command lines are counted; a count the tool prints wins."""
    from crossbuild.foundation import progress

    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    seen: list[Note] = []
    w = Watch(sink=seen.append)
    read = w.counter("make -j2")
    read(b"  CXX      src/libzmq_la-address.lo\n  CXX      src/libzmq_la-ctx.lo\n")
    assert seen == []  # not yet: within the heartbeat
    clock[0] += 11
    read(b"zcc -O2 -c -o crypto/aes.o ../src/crypto/aes.c\nsomething else\n")
    assert seen[-1].text() == "make -j2 (3 files compiled in 11 s)"
    clock[0] += 5
    read(b"  CXX      src/y.lo\n")
    assert len(seen) == 1  # at most every HEARTBEAT_S
    clock[0] += 11
    read(b"[3/40] Building C object x.o\n")  # a count: shown as such, and no more heartbeats
    assert seen[-1] == Note("make -j2", 3, 40)
    clock[0] += 30
    read(b"  CXX      src/z.lo\n")
    assert seen[-1] == Note("make -j2", 3, 40)
