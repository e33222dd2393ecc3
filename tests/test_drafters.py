"""Prompt lookup and the free guesses that keep every verify call at the same width."""
import numpy as np

from spec.drafters import pad_draft, prompt_lookup


def test_prompt_lookup_copies_what_followed_the_latest_longest_match():
    context = np.array([1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3])
    assert prompt_lookup(context, 2).tolist() == [7, 8]  # the 3-gram [1 2 3] last stood before 7 8
    assert prompt_lookup(np.array([4, 5, 6]), 3).tolist() == []


def test_pad_draft_keeps_the_drafts_and_fills_the_width():
    context = [10, 11, 12, 13, 14, 10, 11]
    assert pad_draft(context, np.array([12, 13, 14]), 3).tolist() == [12, 13, 14]
    # One draft, then what followed [10 11 12] earlier in the context.
    assert pad_draft(context, np.array([12]), 5).tolist() == [12, 13, 14, 10, 11]
    # No draft and no match: the last token repeated, still k tokens wide.
    assert pad_draft([1, 2, 3], np.empty(0, dtype=np.int64), 4).tolist() == [3, 3, 3, 3]
    assert pad_draft(context, np.array([12, 13, 14, 15]), 2).tolist() == [12, 13]
