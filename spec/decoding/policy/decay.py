"""Running estimates that forget: each new measurement moves an estimate part of the way, so it
follows the text, and the machine's load, as they change."""

DECAY = 0.7  # weight kept by older rounds in the running estimates
