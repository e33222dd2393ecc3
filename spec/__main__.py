import sys

from spec.cli import main
from spec.models.torch_free import hide_torch

hide_torch()  # nothing here computes with torch: a checkpoint is exported in a child process that has it
sys.exit(main())
