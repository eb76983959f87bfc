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


def _construct_number(loader: _StrictLoader, node: yaml.ScalarNode) -> YamlInt | YamlFloat:
    number: YamlInt | YamlFloat
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
    node = yaml.SafeLoader.compose_document(loader)
    loader._root_node = node
    return node


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_number)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _construct_number)
_StrictLoader.compose_document = _compose_document  # type: ignore[method-assign,assignment]


def load(text: str) -> Any:
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
