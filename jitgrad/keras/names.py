"""Keras's automatic layer and model names: dense, dense_1, dense_2, ...
(reset by ``tf.keras.backend.clear_session()``)."""
_counts = {}


def unique_name(base):
    n = _counts.get(base, 0)
    _counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


def clear_session():
    _counts.clear()
