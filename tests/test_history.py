"""The target's earlier answers as a draft source: searched where the context has no match of its
own, never for the prompt they answered, and output unchanged."""
import numpy as np

from spec.config import GenerationConfig
from spec.decoding.drafters import PromptLookupDrafter, find_in_history
from spec.decoding.engine import generate, stream
from spec.decoding.history import SEPARATOR, AnswerHistory

PROMPT_A, PROMPT_B = [1, 2, 3], [4, 5, 6]


def test_the_corpus_holds_other_prompts_answers_only_the_latest_of_each_within_the_budget():
    history = AnswerHistory(max_tokens=10)
    history.add(PROMPT_A, [10, 11, 12])
    history.add(PROMPT_B, [20, 21])
    assert history.corpus(PROMPT_A).tolist() == [20, 21, SEPARATOR]  # never its own answer
    assert history.corpus([7]).tolist() == [10, 11, 12, SEPARATOR, 20, 21, SEPARATOR]
    history.add(PROMPT_A, [13, 14])  # answered again: the newer answer replaces the older
    assert history.corpus([7]).tolist() == [20, 21, SEPARATOR, 13, 14, SEPARATOR]
    history.add([8], list(range(30, 37)))  # 11 tokens in all: the oldest answer goes
    assert len(history) == 2 and history.corpus([7]).tolist() == [13, 14, SEPARATOR, *range(30, 37), SEPARATOR]
    history.add([9], [])
    assert len(history) == 2  # an empty answer is nothing to search
    assert AnswerHistory().corpus(PROMPT_A).size == 0


def test_a_match_of_three_tokens_in_another_answer_drafts_up_to_that_answers_end():
    corpus = np.array([40, 41, 42, 43, 44, 45, SEPARATOR, 50, 51, 52, 53, SEPARATOR])
    context = np.array([9, 8, 50, 51, 52])
    match = find_in_history(context, corpus)
    assert match.in_history and match.length == 3 and corpus[match.start] == 53 and match.available == 1
    assert find_in_history(np.array([9, 7, 51, 52]), corpus) is None  # 2 tokens: too short
    assert find_in_history(np.array([1, 2, 43, 44, 45]), corpus) is None  # the match ends its answer

    lookup = PromptLookupDrafter(history=corpus)
    assert lookup.propose([7, 41, 42, 43], 4).tokens.tolist() == [44, 45]  # stops at the answer's end
    # The context's own match of 3 or more tokens comes first, whatever the history holds.
    own = [41, 42, 43, 99, 98, 41, 42, 43]
    assert lookup.propose(own, 2).tokens.tolist() == [99, 98]
    # A shorter own match loses to a longer one in the history.
    assert lookup.propose([43, 77, 41, 42, 43], 1).tokens.tolist() == [44]
    assert PromptLookupDrafter().propose([43, 77, 41, 42, 43], 1).tokens.tolist() == [77]


def test_generations_with_a_history_keep_the_target_output_and_remember_finished_answers(tiny_pairs, monkeypatch):
    target, _ = tiny_pairs["llama"]
    history, searched = AnswerHistory(), []
    real_init = PromptLookupDrafter.__init__

    def spy(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        searched.append(self.history.tolist())

    monkeypatch.setattr(PromptLookupDrafter, "__init__", spy)
    config = GenerationConfig(max_new_tokens=32)
    prompts = ["one two three four five six", "one two three four five six seven", "seven six five four three"]
    for prompt in prompts:
        want = generate(prompt, target, config).token_ids
        got = generate(prompt, target, config, prompt_lookup=True, history=history).token_ids
        assert got == want  # drafts from other answers change the speed, never the output
    assert len(history) == len(prompts)
    assert searched[0] == [] and searched[1].count(SEPARATOR) == 1 and searched[2].count(SEPARATOR) == 2  # the others' answers
    steps = stream("a prompt stopped at once", target, config, history=history, cancel=_set())
    assert [s.stats.stop_reason for s in steps][-1] == "cancelled"
    assert len(history) == len(prompts)  # a cancelled answer is not remembered


def _set():
    import threading

    event = threading.Event()
    event.set()
    return event
