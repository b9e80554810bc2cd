#!/bin/sh
# Container pre-launch hook: bring every patch of the image's registry onto the engine tree, then run the
# container's command. Safe on every start: a patched tree is a no-op, an interrupted start is rolled back
# by the next one, and concurrent starts on a shared volume take turns under patchkit's lock.
#
# Configuration (environment; see docs/hook.md and docs/containers.md):
#   PATCHKIT_CMD                how to run patchkit (default `patchkit`). The single-file runner:
#                               PATCHKIT_CMD="python3 -I -S /opt/patchkit/patchkit.pyz" (split on spaces, so
#                               no spaces in these paths)
#   PATCHKIT_ROOT               the engine tree, or
#   PATCHKIT_ROOT_FROM_PACKAGE  the Python distribution whose install folder is the engine tree, looked up
#                               with PATCHKIT_PYTHON (the engine's interpreter) where patchkit has --python
#   PATCHKIT_PATCHES            the patch registry (default /opt/patchkit/patches)
#   PATCHKIT_TARGET             only the patches whose manifest has [target] name = this (a comma list
#                               for several engines in one root, e.g. vllm,aiter: one series, one transaction)
#   PATCHKIT_SKIP_REASON        EMERGENCY ONLY: start the command WITHOUT patching the engine; the reason is
#                               logged on stderr on every start. Unset it to patch again.
#
# Nothing here is exported to the command: it runs with the container's environment as it was.
set -eu

if [ -n "${PATCHKIT_SKIP_REASON:-}" ]; then
    echo "entrypoint: WARNING: PATCHKIT_SKIP_REASON is set ('$PATCHKIT_SKIP_REASON'): starting WITHOUT" \
        "applying any patch; the engine runs exactly as the base image ships it, not as this image requires." \
        "Unset PATCHKIT_SKIP_REASON to patch on the next start." >&2
    exec "$@"
fi

# patchkit prints one line per patch; on a refusal it names the patch, the file and what to do.
status=0
# shellcheck disable=SC2086  # PATCHKIT_CMD is a command line: split on purpose
PATCHKIT_PATCHES="${PATCHKIT_PATCHES:-/opt/patchkit/patches}" ${PATCHKIT_CMD:-patchkit} apply --all || status=$?
if [ "$status" -ne 0 ]; then
    echo "entrypoint: patchkit apply --all exited $status; the engine is not patched as this image requires," \
        "so the container does not start (see the lines above)" >&2
    exit "$status"
fi

exec "$@"
