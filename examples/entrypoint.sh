#!/bin/sh
# Container pre-launch hook: bring every patch of the image's registry onto the engine tree, then run the
# container's command. Safe on every start: a patched tree is a no-op, an interrupted start is rolled back
# by the next one, and concurrent starts on a shared volume take turns under patchkit's lock.
#
# Configuration (environment; see docs/hook.md):
#   PATCHKIT_ROOT               the engine tree, or
#   PATCHKIT_ROOT_FROM_PACKAGE  the Python distribution whose install folder is the engine tree
#   PATCHKIT_PATCHES            the patch registry (default /opt/patchkit/patches)
#   PATCHKIT_TARGET             only the patches whose manifest has [target] name = this
set -eu

: "${PATCHKIT_PATCHES:=/opt/patchkit/patches}"
export PATCHKIT_PATCHES

# patchkit prints one line per patch; on a refusal it names the patch, the file and what to do.
status=0
patchkit apply --all || status=$?
if [ "$status" -ne 0 ]; then
    echo "entrypoint: patchkit apply --all exited $status; the engine is not patched as this image requires," \
        "so the container does not start (see the lines above)" >&2
    exit "$status"
fi

exec "$@"
