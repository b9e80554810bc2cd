"""Options shared by several commands, as decorators, and the one way a patch command runs (run.command) and
reports (speak.answer)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import click
from click.core import ParameterSource

from patchkit.cli.flags import json_option
from patchkit.cli.patch_run import answer_request, root_words, warn_stray_folder, warn_stray_folders
from patchkit.errors import PatchkitError
from patchkit.input.registry import check_registry_folder, find_locations, list_patch_ids
from patchkit.outcome import Action
from patchkit.run.actions import Invocation, Options
from patchkit.run.command import Request
from patchkit.workspace.lock import DEFAULT_LOCK_TIMEOUT

F = TypeVar("F", bound=Callable[..., Any])


__all__ = [
    "json_option", "patch_command_options", "patches_option", "root_words", "run_patch_command", "warn_stray_folder",
    "warn_stray_folders",
]


class FolderPath(click.Path):
    """Completes as a folder in the shell; the value passes through unchanged, and patchkit checks it itself
    (naming the option and what to do) rather than with click's generic message."""

    def __init__(self) -> None:
        super().__init__(file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return value


def patches_option(func: F) -> F:
    return click.option(
        "--patches", "patches_dir", metavar="DIR", envvar="PATCHKIT_PATCHES", show_envvar=True,
        type=FolderPath(),
        help="Registry folder of patches (default: $PATCHKIT_PATCHES, [tool.patchkit] patches, ./patches).",
    )(func)


def complete_patch_id(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion for PATCH: the ids of the registry that --patches (or its defaults) names."""
    try:
        folder = find_locations(patches=ctx.params.get("patches_dir")).patches
        return [pid for pid in list_patch_ids(folder) if pid.startswith(incomplete)]
    except Exception:
        return []


class Selection(NamedTuple):  # immutable and compared by value, ~5x cheaper to create than a frozen dataclass
    """The patches a command acts on: PATCH, or (patch None) --all, narrowed by --target to one engine."""

    patch: str | None
    target: tuple[str, ...] | None  # --target values (each may be a comma list); None: every target


WRITE_ALL_HELP = "Every patch of the registry instead of PATCH, in `after` order, written as one transaction."
READ_ALL_HELP = (
    "Every patch of the registry instead of PATCH, in `after` order, each judged on the tree as the patches "
    "before it leave it."
)


def patch_command_options(func: F) -> F:
    """PATCH or --all [--target], --root or --root-from-package, --patches, --json, --lock-timeout: what
    status, apply and revert share. The command receives `selection` and the chosen tree as `root`."""
    return _patch_command_options(func, WRITE_ALL_HELP)


def read_command_options(func: F) -> F:
    """patch_command_options for a command that writes nothing (status)."""
    return _patch_command_options(func, READ_ALL_HELP)


def _patch_command_options(func: F, all_help: str) -> F:
    decorators = [
        click.argument("patch", required=False, shell_complete=complete_patch_id),
        click.option(
            "--all", "all_patches", is_flag=True,
            help=all_help,
        ),
        click.option(
            "--target", metavar="NAME[,NAME]", envvar="PATCHKIT_TARGET", show_envvar=True, multiple=True,
            help="With --all: only the patches whose manifest has [target] name = NAME; repeat it or give a comma "
            "list for several engines in one root (one series, one transaction).",
        ),
        click.option(
            "--root", metavar="DIR", envvar="PATCHKIT_ROOT", show_envvar=True, type=FolderPath(),
            help="The engine source tree the diff's paths are relative to.",
        ),
        click.option(
            "--root-from-package", metavar="NAME", envvar="PATCHKIT_ROOT_FROM_PACKAGE", show_envvar=True,
            help="Instead of --root: the install folder of Python distribution NAME (its source checkout if "
            "installed editable, else the site-packages folder holding its package), found without importing it.",
        ),
        click.option(
            "--python", metavar="PATH", envvar="PATCHKIT_PYTHON", show_envvar=True,
            help="With --root-from-package: the engine's interpreter (e.g. /opt/venv/bin/python), whose "
            "environment is searched (run with -I -S only to name its site-packages, and refused if another user "
            "could replace it; default: patchkit's own).",
        ),
        patches_option,
        json_option,
        click.option(
            "--lock-timeout", type=click.FloatRange(min=0), default=DEFAULT_LOCK_TIMEOUT, show_default=True,
            metavar="SECONDS", help="How long to wait for another patchkit process on the same root.",
        ),
    ]
    func = _one_selection(_one_root(func))
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _one_root(func: F) -> F:
    """Fold --root / --root-from-package into the one `root` argument the command takes."""

    @functools.wraps(func)
    def wrapper(
        *args: Any, root: str | None, root_from_package: str | None, python: str | None, **kwargs: Any
    ) -> Any:
        chosen = choose_root(root, root_from_package, python)
        by_package = root_from_package is not None and (root is None or chosen != root)
        click.get_current_context().meta[_ROOT_WORDS] = (
            root_words(chosen, root_from_package, python) if by_package else root_words(chosen)
        )
        return func(*args, root=chosen, **kwargs)

    return cast(F, wrapper)


_ROOT_WORDS = "patchkit.root_words"  # ctx.meta: how this run named its tree, for the commands messages suggest


def given_root_words(root: str) -> tuple[str, ...]:
    """How this run named its tree (folded by _one_root), else `--root ROOT`."""
    found = click.get_current_context().meta.get(_ROOT_WORDS)
    return found if isinstance(found, tuple) else root_words(root)


def invocation(root: str, patches: Path, selection: Selection) -> Invocation:
    """This run's Invocation: the tree as it was named, the registry and --target, ready to be spelled again."""
    return Invocation.of(given_root_words(root), patches, selection.target)


def _one_selection(func: F) -> F:
    """Fold PATCH / --all / --target into the one `selection` argument the command takes."""

    @functools.wraps(func)
    def wrapper(*args: Any, patch: str | None, all_patches: bool, target: tuple[str, ...], **kwargs: Any) -> Any:
        if (patch is None) != all_patches:
            if all_patches:
                raise click.UsageError("give PATCH or --all, not both")
            raise click.UsageError(f"which patch? give PATCH or --all; {known_ids(kwargs.get('patches_dir'))}")
        if patch is not None:
            if target and not _from_env("target"):
                raise click.UsageError("--target selects patches for --all; PATCH names one already")
            target = ()  # $PATCHKIT_TARGET is for the --all hook; an explicit PATCH does not need it
        return func(*args, selection=Selection(patch, target or None), **kwargs)

    return cast(F, wrapper)


def known_ids(patches_dir: str | None) -> str:
    """The registry's ids, for a message that asks which patch (the registry's own error if it has none)."""
    try:
        folder = find_locations(patches=patches_dir).patches
        check_registry_folder(folder)
        ids = list_patch_ids(folder)
    except PatchkitError as exc:
        return f"{exc.where}: {exc.message}" if exc.where else exc.message
    if not ids:
        return f"the registry {folder.absolute()} holds no patches"
    return f"known patches in {folder.absolute()}: {', '.join(ids)}"


def _from_env(param: str) -> bool:
    return click.get_current_context().get_parameter_source(param) is ParameterSource.ENVIRONMENT


def choose_root(root: str | None, package: str | None, python: str | None = None) -> str:
    """Exactly one of --root and --root-from-package. Given on the command line, either beats the environment
    ($PATCHKIT_ROOT, $PATCHKIT_ROOT_FROM_PACKAGE); both on the command line, or both in the environment, is an
    error."""
    if root is not None and package is not None:
        root_env, package_env = _from_env("root"), _from_env("root_from_package")
        if root_env == package_env:
            both = "PATCHKIT_ROOT and PATCHKIT_ROOT_FROM_PACKAGE are both set" if root_env else (
                "--root and --root-from-package exclude each other")
            raise click.UsageError(f"{both}; give one of them")
        root, package = (None, package) if root_env else (root, None)
    if package is not None:
        from patchkit.input.environment import locate_distribution_root  # lazy: --root-from-package

        return str(locate_distribution_root(package, python))
    if root is None:
        raise click.UsageError(
            "which engine tree? give --root DIR (or set PATCHKIT_ROOT) or --root-from-package NAME"
        )
    return root


def strict_base_option(func: F) -> F:
    return click.option(
        "--strict-base", is_flag=True,
        help="Exit 9 (apply: and write nothing) unless the tree is verifiably the pinned base: HEAD is "
        "target.pinned_commit, or the files the diff reads match the manifest's [base] fingerprint.",
    )(func)


def keep_going_option(func: F) -> F:
    return click.option(
        "--keep-going", is_flag=True,
        help="With --all: instead of writing nothing when a patch is refused, write the patches that apply "
        "cleanly in order, leave the refused ones and those tied to them by `after`, and exit 1.",
    )(func)


def run_patch_command(
    action: Action,
    selection: Selection,
    root: str,
    patches_dir: str | None,
    as_json: bool,
    options: Options,
    keep_going: bool = False,
) -> None:
    """Run PATCH (or the --all series) with run.command.run_command, print its answer (speak.answer) and exit
    with its code."""
    if keep_going and selection.patch is not None:
        raise click.UsageError("--keep-going goes with --all")
    request = Request(
        action, selection.patch, selection.target, Path(root), given_root_words(root), patches_dir, options,
        keep_going,
    )
    click.get_current_context().exit(answer_request(request, as_json))
