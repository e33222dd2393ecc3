"""What a target call costs per input width: the prior curves, and what this target's calls timed."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from spec.config import F32
from spec.decoding.policy.decay import decayed_average

# A verify call of width w, in one-token steps, before this generation has timed it: the default
# target at the default precision as one CPU timed it (docs/design-notes.md); linear in between and
# beyond. A memory-bound target reads its weights once per call whatever the width, until the
# multiplications themselves show.
PRIOR_WIDTH_COST = {1: 1.0, 2: 1.0, 3: 1.05, 4: 1.18, 5: 1.23, 6: 1.33, 7: 1.36, 9: 1.44, 13: 1.67, 17: 2.08, 25: 2.58, 33: 3.32}
# The same at F32 (Exact mode: f32 compute and KV cache, no 8-bit activations): wide calls cost far
# more, and not monotonically, since the plugin's kernels differ between widths.
PRIOR_WIDTH_COST_F32 = {1: 1.0, 2: 1.1, 3: 1.16, 4: 1.27, 5: 1.61, 6: 1.71, 7: 2.46, 9: 2.58, 13: 3.55, 17: 2.72, 25: 6.03, 33: 4.21}
_PRIOR_SWITCH = 0.25  # and a call right after one of another width this many steps more


def prior_width_cost(width: int, curve: dict[int, float] = PRIOR_WIDTH_COST) -> float:
    """What a call of this width costs in one-token steps, before it is measured (by `curve`)."""
    widths = sorted(curve)
    if width <= widths[-1]:
        return float(np.interp(width, widths, [curve[w] for w in widths]))
    (w0, c0), (w1, c1) = [(w, curve[w]) for w in widths[-2:]]
    return c1 + (width - w1) * max(0.0, (c1 - c0) / (w1 - w0))


@dataclass
class CallCosts:
    """What the target's calls cost per input width on this device, as its generations timed them.

    A property of the compiled target on this device, so it carries over to the target's next
    generation rather than each starting again from the prior curve, which another CPU or precision
    can be far from.
    """

    seconds: dict[int, float] = field(default_factory=dict)  # width -> decayed seconds of a call at a steady width
    switch: float | None = None  # seconds a call pays extra right after one of another width
    prior: dict[int, float] = field(default_factory=lambda: PRIOR_WIDTH_COST)  # the curve until widths are timed
    kept: set[int] = field(default_factory=set)  # widths whose seconds are still the calibration's, timed at another moment

    @classmethod
    def for_precision(cls, precision: str) -> "CallCosts":
        """Nothing timed yet, and the prior curve measured at this precision."""
        return cls(prior=PRIOR_WIDTH_COST_F32 if precision == F32 else PRIOR_WIDTH_COST)

    @classmethod
    def calibrated(cls, seconds: dict[int, float]) -> "CallCosts":
        """Starting from what this target's calls of each width cost on this machine when it was
        calibrated (spec.models.calibration): every width is priced by this CPU's curve from the
        first round, and widths it never timed by that curve's shape."""
        if 1 not in seconds or seconds[1] <= 0:
            raise ValueError(f"a calibrated curve needs a one-token step's seconds, got widths {sorted(seconds)}")
        return cls(dict(seconds), prior={width: s / seconds[1] for width, s in seconds.items()}, kept=set(seconds))

    def recalibrate(self, seconds: dict[int, float]) -> None:
        """A curve of this target timed since the one it was calibrated from (a whole curve after a
        few widths): widths still at the calibration's take this one's seconds, widths the target's
        generations timed keep theirs, and widths neither timed follow this curve's shape."""
        fresh = CallCosts.calibrated(seconds)
        for width in self.kept:
            del self.seconds[width]
        self.kept = {width for width in fresh.seconds if width not in self.seconds}
        self.seconds.update({width: fresh.seconds[width] for width in self.kept})
        self.prior = fresh.prior

    def timed(self, width: int) -> bool:
        """Whether this target's generations have timed calls of this width (not only its calibration)."""
        return width in self.seconds and width not in self.kept

    def cost(self, width: int, last_width: int | None) -> float:
        """Seconds a call of this width takes right after one of `last_width`, counting the switch when it differs."""
        seconds = self.steady(width)
        if last_width is not None and width != last_width:
            seconds += self.switch if self.switch is not None else _PRIOR_SWITCH * self.steady(1)
        return seconds

    def steady(self, width: int) -> float:
        """Seconds a call of this width takes among calls of the same width (in steps before any is timed)."""
        measured = self.seconds
        if width in measured:
            return measured[width]
        if not measured:  # in steps: only ratios matter before anything is measured
            return prior_width_cost(width, self.prior)
        widths = sorted(measured)
        if widths[0] < width < widths[-1]:  # between two timed widths: their own line, not another CPU's curve
            return float(np.interp(width, widths, [measured[w] for w in widths]))
        near = min(measured, key=lambda w: abs(w - width))  # scaled by the prior curve
        return measured[near] * prior_width_cost(width, self.prior) / prior_width_cost(near, self.prior)

    def observe(self, width: int, seconds: float, last_width: int | None) -> None:
        """Learn from a call of this width that took `seconds` right after one of `last_width` (None: unknown)."""
        if last_width == width:
            # The step is what every round is weighed against, and speculation seldom takes one: its
            # first timing here replaces the calibration's, where a slow moment on a shared host can
            # have landed on the step alone. Verify widths are timed every round they are used.
            fresh = width == 1 and width in self.kept
            self.seconds[width] = decayed_average(None if fresh else self.seconds.get(width), seconds)
            self.kept.discard(width)
        elif last_width is not None and width in self.seconds:
            self.switch = decayed_average(self.switch, max(0.0, seconds - self.seconds[width]))


class TimedSchedule:
    """The part every schedule shares: it times the target's calls into `costs` (the target's, shared
    with its other generations) and keeps the width of the last call, since a call right after one
    of another width also pays for OpenVINO re-preparing the model and is no fair sample of a call's
    cost (the first plain step after the prompt, the first round after a pause). Nor is a
    generation's first call at a width: it also pays for preparing that width for the generation's
    own cache, once, which learned as a switch would price every later change of width."""

    def __init__(self, costs: CallCosts | None = None):
        self.costs = costs if costs is not None else CallCosts()
        self._last_width: int | None = None  # input width of the previous target call; None: unknown
        self._called: set[int] = set()  # widths this generation has called the target at

    def observe_other_call(self, width: int | None = None) -> None:
        """The target's last call, of `width` tokens (None: not known), was none of this schedule's
        (the prompt's, or another generation's on the same compiled model, as the race's other lane).
        The next call pays the change of width from that one, or none where it is as wide: a round
        right after the other lane's step is priced with it, and a step after a step is timed as steady."""
        self._last_width = width

    def observe_plain(self, seconds: float) -> None:
        """Learn a plain step's cost, when it is a fair sample (see CallCosts.observe)."""
        self._observe_call(1, seconds)

    def _observe_call(self, width: int, seconds: float) -> None:
        if width in self._called:
            self.costs.observe(width, seconds, self._last_width)
        self._called.add(width)
        self._last_width = width
