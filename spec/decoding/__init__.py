"""Decoding: sampling, the acceptance rule, the drafters, dynamic K, the autoregressive and
speculative loops, and the engine's `generate`, on the KV caches spec.models compiles.

Paper names throughout: `p` is the target model's distribution, `q` the draft's. Built on the
models side; nothing here imports the serving side.
"""
