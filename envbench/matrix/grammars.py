"""The grammars of what the kit puts into a Dockerfile or hands the engine: image references,
repository names, Debian package names and index URLs; and the ${VAR} of matrix strings.

Each check returns None when the value is fine and one sentence saying why not otherwise, so
the matrix (before expansion) and the image plan (after ${VAR} expansion) say the same thing.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from envbench import redact

# ${VAR} or ${VAR:-default} in a matrix string, as a shell writes it: (name, default).
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

# Docker's reference grammar (distribution/reference): [domain/]path[:tag][@digest].
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
PATH_COMPONENT = r"%s(?:%s%s)*" % (_ALNUM, _SEPARATOR, _ALNUM)
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = r"%s(?:\.%s)*(?::[0-9]+)?" % (_DOMAIN_COMPONENT, _DOMAIN_COMPONENT)
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
REFERENCE = re.compile(r"^(?:%s/)?%s(?:/%s)*(?::%s)?(?:@%s)?\Z"
                       % (_DOMAIN, PATH_COMPONENT, PATH_COMPONENT, _TAG, _DIGEST))
REPOSITORY_COMPONENT = re.compile(r"^%s\Z" % PATH_COMPONENT)
# Debian Policy 5.6.1: lower-case letters, digits, + - . ; at least two; starts alphanumeric.
DEBIAN_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+\Z")
# A pip requirement as a lock's input: a name (PEP 508), optional extras and version clauses;
# no URL, path, marker or option (an option such as --index-url would reach the resolver).
_VERSION_CLAUSE = r"(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
PIP_REQUIREMENT = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
                             r"(\[[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\])?"
                             r"\s*(%s(?:\s*,\s*%s)*)?\Z" % (_VERSION_CLAUSE, _VERSION_CLAUSE))
# What every pip stack pins itself: a package list naming them would fight the matrix's keys.
STACK_PACKAGES = ("torch", "torchvision", "numpy")
MAX_REFERENCE = 255


def image_reference(value: str) -> str | None:
    if len(value) > MAX_REFERENCE:
        return "%r is not an image reference (longer than %d characters)" % (value[:40] + "…",
                                                                              MAX_REFERENCE)
    if not REFERENCE.match(value):
        return ("%r is not an image reference (expected [registry/]name[:tag][@sha256:digest], "
                "lower-case name)" % value)
    return None


def repository_component(value: str) -> str | None:
    if not REPOSITORY_COMPONENT.match(value):
        return ("%r cannot name an image: lower-case letters and digits, separated by one '.', "
                "'_', '__' or dashes" % value)
    return None


def debian_package(value: str) -> str | None:
    if not DEBIAN_PACKAGE.match(value):
        return ("%r is not a Debian package name (lower-case letters, digits, '+', '-', '.'; "
                "at least two characters)" % value)
    return None


def pip_requirement(value: str) -> str | None:
    if any(ch.isspace() and ch != " " or ord(ch) < 32 for ch in value):
        # A line break would make one requirement two in the resolver's input file.
        return ("%r is not a package requirement (it holds a line break, a tab or a control "
                "character)" % value[:80])
    match = PIP_REQUIREMENT.match(value) if len(value) <= 200 else None
    if match is None:
        return ("%r is not a package requirement (expected a name with optional [extras] and "
                "version clauses, e.g. einops==0.8.2; no URLs, paths, markers or options)"
                % value[:80])
    name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
    if name in STACK_PACKAGES:
        return ("%s is the stack's own (the environment's %s: key, or numpy: true): not a "
                "package to add" % (match.group(1), name if name != "numpy" else "numpy"))
    return None


def index_url(value: str) -> str | None:
    shown = masked(value)[:200]  # a user:token@ stays out of the message
    if any(ch.isspace() or ord(ch) < 32 or ch in "\"'`\\$;|&<>" for ch in value):
        return "%r is not an index URL (it holds whitespace, quotes or shell characters)" % shown
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - parsed on access: a port past 65535 raises here
    except ValueError as exc:  # "https://[::1/simple": an unclosed IPv6 host
        return "%r is not an index URL (%s)" % (shown, exc)
    if parts.scheme != "https" or not parts.hostname:
        return "%r is not an index URL (expected https://host/path: wheels are fetched over " \
            "https only)" % shown
    return None


def url_variables(value: str) -> str | None:
    """A ${VAR} may give a whole base URL (a mirror: `${PYTORCH_INDEX_URL:-https://…}/cu116`),
    never part of one: `https://${TOKEN}.host/` or `https://host/${SECRET}/` would send the
    variable's value to a server whenever `doctor` or `lock` asks it for a page."""
    for match in VARIABLE.finditer(value):
        if match.start() != 0:
            return ("${%s} inside a URL would send its value to that server; only a whole "
                    "base URL may come from a variable (${%s:-https://…}/path)"
                    % (match.group(1), match.group(1)))
    return None


def masked(url: str) -> str:
    """A URL as it may be printed: credentials (user:password@) replaced by ***."""
    return redact.credentials(url)


UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}


def size_bytes(size: str) -> int:
    """Docker's size grammar as the matrix accepts it ('16g', '512m', '1024'). Here, with
    the standard library only: the results stage reads it too, where pydantic may be absent
    (bench's own tests on Debian's Python)."""
    match = re.fullmatch(r"(\d+)([kmg]?)", size)
    if match is None:
        raise ValueError("%r is not a size such as 512m or 16g" % size[:40])
    return int(match.group(1)) * UNITS[match.group(2)]
