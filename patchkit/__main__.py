from patchkit.cli.restart import entry

entry()  # `python -m patchkit` says "patchkit" in help, and completes as _PATCHKIT_COMPLETE
