"""A race as one JSON object: what `python -m spec race --json` prints and the page's /race API
returns last. Each lane has the keys of `python -m spec run --json` (its text, token ids, the
models that made it and its statistics); beside them stand the verdict and why."""
from __future__ import annotations

import dataclasses

from spec.config import AUTOREGRESSIVE, SPECULATIVE
from spec.serving.lanes import Lane
from spec.serving.playback import View, replay_label
from spec.serving.verdict import Verdict, explain


def lane_numbers(lane: Lane, target: str | None, draft: str | None, drafter: str | None) -> dict:
    """One lane as one flat JSON-ready dict, with the keys of `python -m spec run --json`: its text,
    token ids, mode, the models and drafter that made it, and its statistics."""
    return {
        "text": "".join(text for text, _ in lane.pieces), "token_ids": list(lane.token_ids), "mode": lane.mode,
        "drafter": drafter, "target": target, "draft": draft, **lane.stats.as_dict(),
    }


def race_numbers(ar: Lane, sp: Lane, verdict: Verdict | None, k: int, target: str | None, draft: str | None,
                 drafter: str | None) -> dict:
    """The verdict, why (Explanation, at K = `k`) and both lanes; `target` made both, `draft` and
    `drafter` the speculative lane's drafts."""
    return {
        "verdict": dataclasses.asdict(verdict) if verdict else None,
        "explanation": dataclasses.asdict(explain(ar.stats, sp.stats, k)),
        AUTOREGRESSIVE: lane_numbers(ar, target, None, None),
        SPECULATIVE: lane_numbers(sp, target, draft, drafter),
    }


def view_numbers(view: View) -> dict:
    """The race one visitor watches, as the /race API returns it last: whether it was live, joined
    or a replay, when and on which CPU it ran, how many watch it, its phase and any error, then
    `race_numbers`."""
    request, recording = view.recording.request, view.recording
    return {
        "how": str(view.how), "replay_of": replay_label(view) or None, "ran_at": recording.started,
        "ran_on": recording.machine, "watching": view.watching, "phase": str(view.phase), "error": view.error,
        **race_numbers(
            view.autoregressive, view.speculative, view.verdict, request.config.num_assistant_tokens if request else 4,
            request.target.ref if request else None, request.draft.ref if request and request.draft else None,
            request.drafter if request else None,
        ),
    }
