"""Stopping and streaming rules, on a stand-in tokenizer (one character per token)."""
from spec.config import GenerationConfig
from spec.decoding.generation import Generation


class CharTokenizer:
    def decode(self, ids, **_):
        return "".join(chr(i) for i in ids)


def stream(text, **settings):
    generation = Generation(CharTokenizer(), [1], GenerationConfig(**{"max_new_tokens": 100, **settings}), {0})
    steps = []
    for i in range(0, len(text), 3):  # three tokens per step, as a speculative round may give
        chunk = [ord(c) for c in text[i : i + 3]]
        steps.append(generation.emit(chunk, ["accepted"] * len(chunk)))
        if steps[-1].finished:
            break
    return steps


def test_a_stop_string_spanning_steps_is_never_streamed():
    steps = stream("abcdeSTOPxyz", stop_strings=("eSTO",))
    assert "".join(s.text for s in steps) == "abcd"
    assert steps[-1].finished and steps[-1].stats.stop_reason == "stop_string"


def test_text_that_only_looks_like_a_stop_string_is_released():
    steps = stream("abcdSTxyz", stop_strings=("STOP",))
    assert [s.text for s in steps] == ["abc", "d", "STxyz"]  # "ST" waited while it could start "STOP"
    assert "".join(s.text for s in steps) == "abcdSTxyz" and not steps[-1].finished


def test_eos_and_max_new_tokens_cut_a_step():
    generation = Generation(CharTokenizer(), [1], GenerationConfig(max_new_tokens=100), {0})
    step = generation.emit([ord("a"), 0, ord("b")], ["accepted"] * 3)
    assert step.text == "a" and step.finished and step.stats.stop_reason == "eos"
    steps = stream("abcdefgh", max_new_tokens=4)
    assert "".join(s.text for s in steps) == "abcd" and steps[-1].stats.stop_reason == "max_new_tokens"
