#!/bin/bash
# Slurm launcher: patch the engine tree on every node, then start the engine on every node
# (docs/containers.md). The engine's command comes last:
#
#   ENGINE_ROOT=/opt/ATOM sbatch --nodes=4 examples/slurm-launch.sh python3 -m atom.entrypoints.serve ...
#
#SBATCH --job-name=atom-patched
#SBATCH --ntasks-per-node=1
#
# ENGINE_ROOT on node-local storage (a container's own filesystem, /local/scratch): every node patches its
# own copy, in parallel. ENGINE_ROOT on shared storage (one tree for all nodes): the nodes take turns on
# <root>/.patchkit/lock (flock); one writes, the others find it applied. flock is cluster-wide on NFSv4 (and
# NFSv3 with lockd); where the filesystem refuses flock (ENOLCK, EOPNOTSUPP, ENOSYS: NFS without lockd,
# Lustre mounted without `flock`) patchkit stops with an error and writes nothing; where flock is silently
# node-local (NFS `nolock` or `local_lock=flock`, Lustre `localflock`, BeeGFS without global file locks)
# set PATCHKIT_SHARED_TREE=1: one node patches, the others only check.
set -euo pipefail

: "${ENGINE_ROOT:=/opt/ATOM}"
: "${PATCHKIT_PYZ:=/opt/patchkit/patchkit.pyz}"        # one file: no install on the nodes
: "${PATCHKIT_PATCHES:=/opt/patchkit/patches}"
: "${ENGINE_PYTHON:=python3}"                           # the nodes' interpreter (3.10+)
export PATCHKIT_PATCHES PATCHKIT_TARGET="${PATCHKIT_TARGET:-ATOM}"
patchkit=("$ENGINE_PYTHON" -I -S "$PATCHKIT_PYZ")

if [ "${PATCHKIT_SHARED_TREE:-0}" = 1 ]; then
    # One writer for the shared tree, then every node checks it reads `applied` (status writes nothing).
    srun --nodes=1 --ntasks=1 "${patchkit[@]}" apply --all --root "$ENGINE_ROOT"
    srun --ntasks-per-node=1 "${patchkit[@]}" status --all --root "$ENGINE_ROOT"
else
    # Every node, at once; a node whose tree cannot be patched fails the step and so the job.
    srun --ntasks-per-node=1 "${patchkit[@]}" apply --all --root "$ENGINE_ROOT"
fi

# The engine, on every node, from the patched tree. patchkit's processes have exited: the engine's
# environment is the job's, untouched.
[ "$#" -gt 0 ] || { echo "slurm-launch: give the engine's command as arguments" >&2; exit 2; }
srun --ntasks-per-node=1 "$@"
