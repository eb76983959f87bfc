"""The facts bench and the host must agree on, defined once: what a name, a function and a
digest look like, and the most epochs a run may have. Standard library only, importable on
Python 3.8 (inside the images) and by the host's matrix checks; the result schema is held
to them by tests/host/test_contract.py.
"""
import re

# An environment's, a target's or a workload's name: shown on the page, part of file names
# and image tags.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
# The function a user's workload file defines (build by default).
FUNCTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
# A read-only input of a user's workload: the name build() reads it under (ctx.inputs[NAME]).
INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,62}\Z")
# The matrix's bound (benchmark.epochs), bench's and the schema's.
MAX_EPOCHS = 1000


def json_schema_pattern(pattern: "re.Pattern[str]") -> str:
    """The same pattern for a JSON-schema or pydantic check, whose regex engines end a string
    at $ where Python's re needs \\Z not to accept a final newline."""
    assert pattern.pattern.endswith("\\Z")
    return pattern.pattern[:-2] + "$"
