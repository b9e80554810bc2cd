from patchkit.cli.start import entry

entry()  # `python -m patchkit` says "patchkit" in help, and completes as _PATCHKIT_COMPLETE
