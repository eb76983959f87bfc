"""matrix.yaml's environments: one PyTorch/CUDA stack each, one image each."""
from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field, field_validator, model_validator

from envbench.matrix import grammars
from envbench.matrix.fields import (
    CUDA_VERSION,
    Flag,
    Strict,
    Text,
    not_a_number,
    refuse,
    version_text,
)


class Environment(Strict):
    """One PyTorch/CUDA stack = one image."""

    python: Text = "3.11"
    torch: Optional[Text] = None
    torchvision: Optional[Text] = None
    cuda: Optional[Text] = None
    source: Literal["pip", "debian"] = "pip"
    base: Optional[Text] = None
    dockerfile: Optional[Text] = None
    index_url: Optional[Text] = None
    wheelhouse: Optional[Text] = None
    apt: tuple[Text, ...] = ()
    # What a user's workload imports beyond torch: locked with hashes with the rest.
    packages: tuple[Text, ...] = ()
    # numpy beside torch in a pip stack: torch warns in every cell's log without it, and the
    # tutorial uses it. Debian's python3-torch depends on it anyway.
    numpy: Flag = True
    targets: Optional[tuple[Text, ...]] = None
    # The wheel platform the lock resolves for; default: this machine's, with the glibc of
    # Debian bookworm (python:*-slim and the local Debian base).
    platform: Optional[Annotated[str, Field(strict=True,
                                            pattern=r"^(x86_64|aarch64)-manylinux_2_\d+$")]] = None

    @field_validator("python", "torch", "torchvision")
    @classmethod
    def _versions(cls, value: Optional[str]) -> Optional[str]:
        return version_text(value)

    _numbers = field_validator("python", "torch", "torchvision", "cuda",
                               mode="before")(not_a_number)

    @field_validator("cuda")
    @classmethod
    def _cuda(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not CUDA_VERSION.match(value):
            raise ValueError("%r is not a CUDA version (expected MAJOR.MINOR, e.g. 12.4)" % value)
        return value

    @field_validator("base")
    @classmethod
    def _base(cls, value: Optional[str]) -> Optional[str]:
        # With ${VAR}s the expanded value is checked when the image is planned.
        if value is not None and not grammars.VARIABLE.search(value):
            refuse(grammars.image_reference(value))
        return value

    @field_validator("index_url")
    @classmethod
    def _index_url(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not grammars.VARIABLE.search(value):
            refuse(grammars.index_url(value))
        if value is not None:
            refuse(grammars.url_variables(value))
        return value

    @field_validator("apt")
    @classmethod
    def _apt(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            refuse(grammars.debian_package(name))
        return value

    @field_validator("packages")
    @classmethod
    def _packages(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for requirement in value:
            refuse(grammars.pip_requirement(requirement))
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Environment:
        if self.source == "pip" and self.torch is None:
            raise ValueError("torch: required for source 'pip' (the version to pin)")
        if self.source == "debian" and (self.cuda or self.index_url or self.wheelhouse):
            raise ValueError("source 'debian' installs Debian's CPU build of python3-torch: "
                             "cuda, index_url and wheelhouse do not apply")
        if self.source == "debian" and self.packages:
            raise ValueError("packages: a Debian stack installs Debian's packages: name them "
                             "in apt (e.g. python3-einops)")
        if self.index_url and self.wheelhouse:
            raise ValueError("give index_url or wheelhouse, not both")
        return self

    @property
    def kind(self) -> str:
        return "cuda" if self.cuda else "cpu"
