"""Speculative sampling on OpenVINO: a draft proposes K tokens, the target verifies them in one call.

Paper names throughout: `p` is the target model's distribution, `q` the draft's
(Leviathan et al. 2023; Chen et al. 2023).
"""
