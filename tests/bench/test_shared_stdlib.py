"""bench's standard-library modules, which bench, the host and ./noxw share: an exception's
first line (never an IndexError, whatever the message), a bounded read of a file the kit did
not write (on real links, FIFOs, sockets and files past their cap), and an index URL checked
and quoted without credentials. pip's settings against pip itself:
tests/host/test_pip_settings.py."""
from __future__ import annotations

import os
import socket
import threading

import pytest

from bench.boundedread import Unreadable, read_regular
from bench.messages import NO_MESSAGE, first_line
from bench.urls import http_url, without_credentials


@pytest.mark.parametrize("message, expected", [
    ("CUDA out of memory. Tried to allocate 2 GiB\nmore detail", "CUDA out of memory. Tried to "
                                                                  "allocate 2 GiB"),
    ("\n\n  second line first  \nthird", "second line first"),
    ("", NO_MESSAGE),
    (" \n\t\n", NO_MESSAGE),
])
def test_the_first_line_is_the_first_that_says_something(message, expected):
    assert first_line(ValueError(message)) == expected


def test_the_first_line_is_cut_to_its_limit():
    assert first_line(RuntimeError("x" * 1000)) == "x" * 300
    assert first_line(RuntimeError("x" * 1000), 40) == "x" * 40


def test_an_exception_whose_str_is_not_its_args_is_read_through_str():
    class Odd(Exception):
        def __str__(self):
            return "said by __str__"
    assert first_line(Odd()) == "said by __str__"


@pytest.mark.parametrize("url, usable", [
    ("https://pypi.example/simple", True),
    ("http://127.0.0.1:3141/root/pypi/+simple/", True),
    ("https://user:token@host/simple", True),
    ("ftp://host/simple", False),
    ("https://", False),
    ("https://host /simple", False),
    ("https://host/\x7fsimple", False),
    ("https://[::1/simple", False),
    ("https://host:99999/simple", False),
    ("https://host:0/simple", False),
])
def test_an_index_url_is_usable_only_with_a_scheme_a_host_and_a_port_urllib_can_ask(url,
                                                                                   usable):
    assert http_url(url) is usable


def test_credentials_are_masked_wherever_a_url_appears_in_a_text():
    text = "fetch https://user:s3cret@host/simple failed; then http://tok@other/x"
    shown = without_credentials(text)
    assert "s3cret" not in shown and "tok@" not in shown
    assert shown == "fetch https://***@host/simple failed; then http://***@other/x"
    assert without_credentials("no url here: a@b") == "no url here: a@b"


def test_a_regular_file_within_its_cap_is_read_whole(tmp_path):
    path = tmp_path / "pip.conf"
    path.write_bytes(b"[global]\nindex-url = https://example.org/simple\n")
    assert read_regular(path, 100) == path.read_bytes()
    assert read_regular(str(path), len(path.read_bytes())) == path.read_bytes()


def _unreadable(path, cap=1 << 20):
    with pytest.raises(Unreadable) as caught:
        read_regular(path, cap)
    return caught.value


def test_a_file_past_its_cap_is_refused_by_its_size(tmp_path):
    path = tmp_path / "big"
    path.write_bytes(b"x" * 101)
    error = _unreadable(path, 100)
    assert error.kind == "size" and "101 bytes, more than the 100" in str(error)


def test_a_link_is_not_followed_even_to_a_plain_file(tmp_path):
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    error = _unreadable(tmp_path / "link")
    assert (error.kind, error.what) == ("link", "a symbolic link")


def test_a_fifo_is_named_and_not_waited_on(tmp_path):
    """Opened without O_NONBLOCK, a FIFO with no writer blocks the reader for ever: the read
    runs in a thread the test gives up on after 20 s, so a hang fails instead of stalling."""
    fifo = tmp_path / "pip.conf"
    os.mkfifo(fifo)
    outcome = []
    reader = threading.Thread(target=lambda: outcome.append(_unreadable(fifo)), daemon=True)
    reader.start()
    reader.join(20)
    assert outcome, "the read of a FIFO with no writer did not return"
    assert outcome[0].kind == "special"
    assert str(outcome[0]) == "a FIFO (named pipe), not a regular file"


def test_a_socket_a_device_and_a_folder_are_named(tmp_path):
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "s"))
    try:
        assert _unreadable(tmp_path / "s").what == "a socket"
    finally:
        sock.close()
    assert _unreadable("/dev/null").what == "a character device"
    assert _unreadable(tmp_path).what == "a folder"


def test_a_missing_file_is_the_systems_error(tmp_path):
    error = _unreadable(tmp_path / "absent")
    assert error.kind == "os" and error.what is None and "No such file" in str(error)
