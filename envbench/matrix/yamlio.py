"""YAML loading that refuses duplicate keys (PyYAML silently keeps the last one) and keeps
the text of every number, so that `python: 3.10` (read as 3.1) can be named as written."""
from __future__ import annotations

from typing import Any

import yaml


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, path: list[str], key: str, line: int):
        self.path = path + [key]
        self.line = line
        super().__init__("duplicate name %r (line %d)" % (key, line))


class _StrictLoader(yaml.SafeLoader):
    _root_node: yaml.Node | None = None  # the document being read, for key paths


class YamlInt(int):
    """An int that remembers how the file wrote it (for 'quote it' messages)."""

    source: str


class YamlFloat(float):
    """A float that remembers how the file wrote it: `3.10` is read as 3.1, and says so."""

    source: str


# Bounds on what a few hundred bytes of YAML may cost. Nested aliases ("billion laughs")
# expand exponentially: the composed document is counted with every alias expanded, before
# anything is constructed or searched, and refused past MAX_VALUES.
MAX_DEPTH = 50
MAX_VALUES = 100_000
MAX_NUMBER_CHARACTERS = 40


def _refuse(node: yaml.Node, problem: str) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


def _check_size(root: yaml.Node) -> None:
    """Depth and expanded size of the document, iteratively (no recursion to exhaust)."""
    count = 0
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise _refuse(root, "its aliases expand to more than %d values" % MAX_VALUES)
        if depth > MAX_DEPTH:
            raise _refuse(node, "nested more than %d levels deep" % MAX_DEPTH)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)


def _construct_number(loader: _StrictLoader, node: yaml.ScalarNode) -> YamlInt | YamlFloat:
    number: YamlInt | YamlFloat
    if len(str(node.value)) > MAX_NUMBER_CHARACTERS:
        raise _refuse(node, "a number of %d characters (a matrix's numbers have a few)"
                      % len(str(node.value)))
    if node.tag.endswith(":int"):
        number = YamlInt(yaml.SafeLoader.construct_yaml_int(loader, node))
    else:
        number = YamlFloat(yaml.SafeLoader.construct_yaml_float(loader, node))
    number.source = str(node.value)
    return number


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode,
                       deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise _refuse(key_node, "a key must be a name, not a %s" % (
                "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"))
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise DuplicateKeyError(_path_of(loader, node), str(key), key_node.start_mark.line + 1)
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


def _path_of(loader: _StrictLoader, target: yaml.Node) -> list[str]:
    """Key path from the document root to ``target`` (for the error message)."""
    def walk(node: yaml.Node, path: list[str]) -> list[str] | None:
        if node is target:
            return path
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                found = walk(value_node, path + [str(key_node.value)])
                if found is not None:
                    return found
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                found = walk(item, path + ["[%d]" % index])
                if found is not None:
                    return found
        return None

    root = loader._root_node
    return (walk(root, []) if root is not None else None) or []


def _compose_document(loader: _StrictLoader) -> yaml.Node | None:
    try:
        node = yaml.SafeLoader.compose_document(loader)
    except RecursionError:  # the composer recurses: thousands of levels exhaust the stack
        raise yaml.YAMLError("nested more than %d levels deep" % MAX_DEPTH)
    if node is not None:
        _check_size(node)
    loader._root_node = node
    return node


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_number)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _construct_number)
_StrictLoader.compose_document = _compose_document  # type: ignore[method-assign,assignment]


def load(text: str) -> Any:
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
