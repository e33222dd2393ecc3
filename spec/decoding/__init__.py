"""Decoding: the OpenVINO runtime and its KV state, sampling, the acceptance rule, the drafters,
dynamic K, the autoregressive and speculative loops, and the engine's `generate`.

Paper names throughout: `p` is the target model's distribution, `q` the draft's. Nothing here
imports the serving side.
"""
