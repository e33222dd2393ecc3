"""A prompt as the model reads it: its token ids, in the model's chat template when it has one."""
from __future__ import annotations


def encode_prompt(tokenizer, prompt: str, chat: bool = True) -> list[int]:
    """Token ids of the prompt, wrapped in the model's chat template when it has one and chat is on."""
    if not isinstance(prompt, str):
        raise ValueError(f"prompt must be a string, got {type(prompt).__name__} {str(prompt)[:80]!r}")
    if not prompt.strip():
        raise ValueError(f"prompt is empty ({prompt!r}): give the model some text to continue")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate: half of a character, which no tokenizer reads
        raise ValueError(f"prompt is not valid text at character {error.start} ({prompt[error.start]!r}, half of a "
                         "character): paste it again as plain text") from None
    if chat and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    return tokenizer(prompt)["input_ids"]
