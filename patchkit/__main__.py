from patchkit.cli import main

main(prog_name="patchkit")  # `python -m patchkit` says "patchkit" in help, and completes as _PATCHKIT_COMPLETE
