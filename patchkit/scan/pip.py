"""The one reading of a package-installing command line: `pip install` (also `python -m pip`, `uv pip`,
`pipx install`, `pipx inject ENV`) and `conda install` (mamba, micromamba): what it installs, `-e` or not, and
from which indexes or channels. The fork, index and source-install rules and the engine resolver (which folders
are installed checkouts) all read it here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from patchkit.scan.shell import program_name


@dataclass(frozen=True)
class PipOperand:
    """One requirement of a `pip install` command line: where it is, as written, and whether it is `-e`."""

    index: int  # into argv
    word: str  # `name @ url` joined when written as three words
    editable: bool


@dataclass(frozen=True)
class PipArguments:
    """What a `pip install ...` command line installs, and from which indexes (the default one left out)."""

    operands: tuple[PipOperand, ...]
    indexes: tuple[str, ...]


@functools.lru_cache(maxsize=4096)  # each rule asks of every command; argv is a tuple
def pip_arguments(argv: tuple[str, ...]) -> PipArguments | None:
    """The operands and non-default indexes of a pip install (also `python -m pip`, `uv pip`, `pipx install`,
    `pipx inject ENV ...`), or None when the command installs nothing with pip: the one walk over pip's
    options that the fork, index and source-install rules share."""
    start = _pip_install(argv)
    if start is None:
        return None
    operands: list[PipOperand] = []
    indexes: list[str] = []
    index = start
    while index < len(argv):
        word = argv[index]
        option, eq, value = word.partition("=")
        editable = word in ("-e", "--editable") and index + 1 < len(argv)
        if option in _INDEX_OPTIONS:
            if not eq and index + 1 < len(argv):
                value = argv[index + 1]
                index += 1
            if value and not _DEFAULT_INDEX.match(value):
                indexes.append(value)
            index += 1
            continue
        if editable:
            index += 1
            word = argv[index]
        elif word in _PIP_VALUED:
            index += 2
            continue
        elif word.startswith("-"):
            index += 1
            continue
        at = index
        if index + 2 < len(argv) and argv[index + 1] == "@":
            word = f"{word} @ {argv[index + 2]}"
            index += 2
        operands.append(PipOperand(at, word, editable))
        index += 1
    return PipArguments(tuple(operands), tuple(indexes))


def _pip_install(argv: tuple[str, ...]) -> int | None:
    """The index of the first argument after `install` of a pip command (after `inject ENV` of pipx), or None."""
    for index, word in enumerate(argv):
        name = program_name(word)
        is_pip = re.fullmatch(r"pip[\d.]*", name) is not None
        is_module = word == "pip" and index >= 1 and argv[index - 1] == "-m"
        is_uv = word == "pip" and index >= 1 and program_name(argv[index - 1]) == "uv"
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if (is_pip or is_module or is_uv) and following == "install":
            return index + 2
        if name == "pipx" and following == "install":
            return index + 2
        if name == "pipx" and following == "inject" and index + 2 < len(argv):
            return index + 3  # pipx inject ENV PACKAGE...
    return None


_PIP_VALUED = frozenset(
    {
        "-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links",
        "-t", "--target", "--prefix", "--root", "--src", "--upgrade-strategy", "-C", "--config-settings",
        "--platform", "--python-version", "--implementation", "--abi", "--progress-bar", "--log", "--cache-dir",
        "--trusted-host", "--proxy", "--timeout", "--retries", "--exists-action", "--global-option",
        "--install-option", "--no-binary", "--only-binary", "--python",
    }
)
_INDEX_OPTIONS = frozenset({"-i", "--index-url", "--extra-index-url", "-f", "--find-links"})
_DEFAULT_INDEX = re.compile(r"^https?://(?:pypi\.org|pypi\.python\.org|files\.pythonhosted\.org)(?:/|$)")
_CONDA = frozenset({"conda", "mamba", "micromamba"})


def conda_arguments(argv: tuple[str, ...]) -> PipArguments | None:
    """`conda install -c URL pkg` (mamba, micromamba): its packages, and the channels given as URLs (a named
    channel such as conda-forge is the distribution's own)."""
    at = next((i for i, w in enumerate(argv) if program_name(w) in _CONDA), None)
    if at is None or at + 1 >= len(argv) or argv[at + 1] != "install":
        return None
    operands: list[PipOperand] = []
    channels: list[str] = []
    index = at + 2
    while index < len(argv):
        word = argv[index]
        option, eq, value = word.partition("=")
        if option in ("-c", "--channel", "-n", "--name", "-p", "--prefix"):
            if not eq and index + 1 < len(argv):
                value = argv[index + 1]
                index += 1
            if option in ("-c", "--channel") and "://" in value:
                channels.append(value)
        elif not word.startswith("-"):
            operands.append(PipOperand(index, word.split("=", 1)[0], False))
        index += 1
    return PipArguments(tuple(operands), tuple(channels))


def is_local_tree(word: str) -> bool:
    """A pip operand that is a local folder (not a requirement name, URL, archive or requirements file)."""
    if "://" in word or word.endswith((".whl", ".zip", ".tar.gz", ".tgz", ".txt")) or "@" in word:
        return False
    return word in (".", "..") or word.startswith(("./", "../", "/", "$", "~")) or "/" in word
