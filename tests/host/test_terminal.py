"""Lines from work that runs side by side (the demo's two builds) reach the user whole."""
from __future__ import annotations

import threading
import time

from envbench import terminal


class _SlowStream:
    """A terminal that takes its time with each write, so that threads meet inside print()."""

    def __init__(self) -> None:
        self.text = ""
        self.flushes = 0

    def write(self, text: str) -> int:
        time.sleep(0.0005)
        self.text += text
        return len(text)

    def flush(self) -> None:
        self.flushes += 1


def _print_lines(stream, name: str, count: int) -> None:
    for i in range(count):
        print("  %s | line %d of %s" % (name, i, name), file=stream, flush=True)


def test_threads_printing_side_by_side_never_mix_a_line():
    slow = _SlowStream()
    shown = terminal.WholeLines(slow)
    names = ["debian-python3-torch", "torch2.13.0-cpu", "data"]
    threads = [threading.Thread(target=_print_lines, args=(shown, n, 200)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = slow.text.split("\n")
    assert lines.pop() == ""  # the text ends with a newline
    assert len(lines) == 600
    for line in lines:
        name = line.split(" | ")[0].strip()
        assert line == "  %s | line %s of %s" % (name, line.split()[-3], name), line
    for name in names:  # each thread's lines in its own order
        assert [int(x.split()[-3]) for x in lines if x.startswith("  %s |" % name)] == \
            list(range(200))
    assert slow.flushes > 0


def test_the_same_threads_mix_lines_on_a_bare_stream():
    """The control: without WholeLines, the same printing does mix (print writes the text
    and its newline as two calls), so the test above can tell."""
    slow = _SlowStream()
    threads = [threading.Thread(target=_print_lines, args=(slow, n, 200))
               for n in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert any(line.count("|") != 1 for line in slow.text.split("\n")[:-1])


def test_text_without_its_newline_waits_for_it():
    slow = _SlowStream()
    shown = terminal.WholeLines(slow)
    shown.write("half a ")
    assert slow.text == ""
    shown.write("line\nand the start of another")
    assert slow.text == "half a line\n"
    assert not shown.isatty()


def test_once_closed_nothing_more_reaches_the_stream():
    slow = _SlowStream()
    shown = terminal.WholeLines(slow)
    print("before", file=shown, flush=True)
    shown.close()
    print("after", file=shown, flush=True)
    assert slow.text == "before\n"
