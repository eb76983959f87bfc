"""bench.common, which bench, the host and ./noxw share: an exception's first line (never an
IndexError, whatever the message), and an index URL checked and quoted without credentials."""
from __future__ import annotations

import pytest

from bench.common import NO_MESSAGE, first_line, http_url, without_credentials


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
