"""Pauses between probes: how long a drafter that does not pay waits before it is tried again."""

# Plain steps before probing again, doubling while probes confirm that drafting does not pay, up to
# a pause that keeps probes within PROBE_SHARE of the time. A probe can be dear: the draft catches
# up on all it missed and the target's input width changes twice (about 5-7 plain steps for an INT4
# copy of SmolLM2, which needs pauses of 512: with 128 such a pair ran at 0.93x of plain decoding);
# SmolLM2 catching up for Qwen costs a fraction of a step, and long pauses would only miss rounds
# that pay.
FIRST_PAUSE, MIN_MAX_PAUSE, MAX_PAUSE = 8, 32, 512
PROBE_SHARE = 0.02
