import os
import sys

try:
    from spec.cli import main
    from spec.models.torch_free import hide_torch

    hide_torch()  # nothing here computes with torch: a checkpoint is exported in a child process that has it
    code = main()
except KeyboardInterrupt:  # Ctrl-C before the command line's own handling began (while importing)
    print("error: interrupted", file=sys.stderr)
    code = 130
if code == 130:
    # Interrupted: a conversion may still run in another thread (prepare), which a normal exit would
    # wait for; what it leaves half-written is cleared by the next conversion of that model.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
