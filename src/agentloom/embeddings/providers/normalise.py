"""The one normalisation every provider applies to its vectors (its own module: the providers and the
package that chooses among them both use it, without importing each other)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


def l2_normalise(vectors: Any) -> np.ndarray:
    """Row-wise L2 normalisation in float32 (a zero row stays zero rather than becoming NaN)."""
    import numpy as np

    arr = np.asarray(vectors, dtype=np.float32)
    norms: NDArray[np.float32] = np.maximum(np.linalg.norm(arr, axis=1, keepdims=True), 1e-12)
    return (arr / norms).astype(np.float32, copy=False)
