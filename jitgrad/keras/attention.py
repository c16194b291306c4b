"""Keras 3's MultiHeadAttention for (batch, steps, features) inputs (attention over axis 1):
query / key / value / attention_output EinsumDense projections, scaled dot-product scores,
a masked softmax over the key steps, dropout on the scores in training."""
import math

import numpy as np

from .. import context
from ..ops import array_ops, einsum, linalg_ops, math_ops, nn_ops, reduction_ops
from .activation_layers import Softmax
from . import initializers
from .base_layer import Layer
from .einsum_dense import EinsumDense
from .masking import get_keras_mask, set_keras_mask
from . import seed_generator


# keras.src.backend.tensorflow.nn._get_large_negative
_DOT_PRODUCT_NEGATIVE = {"float16": 65500.0 * -0.7, "float32": 3.38953e38 * -0.7, "float64": 3.38953e38 * -0.7,
                         "bfloat16": 3.38953e38 * -0.7}


def _positive_int(value, what, allow_none=False):
    if (value is None and allow_none) or (isinstance(value, int) and value > 0):
        return
    raise ValueError(f"Received an invalid value for argument `{what}`, expected a positive integer"
                     f"{' or `None`' if allow_none else ''}. Received: {what}={value}")


class MultiHeadAttention(Layer):
    """Keras 3's masks: the query's Keras mask (not a ``query_mask`` argument, which Keras 3
    replaces by it) and the value's / key's mask (passed, or their Keras masks) join
    ``attention_mask``; the inputs' masks are removed, the output gets the query's."""
    _supports_masking = True

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None,
                 attention_axes=None, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, seed=None, **kwargs):
        _positive_int(num_heads, "num_heads")
        _positive_int(key_dim, "key_dim")
        _positive_int(value_dim, "value_dim", allow_none=True)
        super().__init__(**kwargs)
        if any(a is not None for a in (kernel_regularizer, bias_regularizer, activity_regularizer,
                                       kernel_constraint, bias_constraint)):
            raise NotImplementedError("jitgrad's MultiHeadAttention has no regularizers or constraints.")
        if attention_axes not in (None, 1, (1,), [1]):
            raise NotImplementedError("jitgrad's MultiHeadAttention attends over axis 1 of rank-3 inputs only.")
        self.num_heads, self.key_dim = num_heads, key_dim
        self.value_dim = value_dim or key_dim
        self.dropout, self.use_bias, self.seed = dropout, use_bias, seed
        self.output_shape_arg = (output_shape,) if isinstance(output_shape, int) else \
            tuple(output_shape) if output_shape else None
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self._softmax = Softmax(axis=-1)

    def build(self, query_shape, value_shape=None, key_shape=None):
        if value_shape is None:       # called through __call__ with the query alone: built in call
            return
        key_shape = value_shape if key_shape is None else key_shape
        if tuple(value_shape[1:-1]) != tuple(key_shape[1:-1]):
            raise ValueError(f"All dimensions of `value` and `key`, except the last one, must be equal. Received: "
                             f"value_shape={value_shape} and key_shape={key_shape}")
        if any(len(s) != 3 for s in (query_shape, value_shape, key_shape)):
            raise NotImplementedError("jitgrad's MultiHeadAttention takes rank-3 query, key and value.")
        def heads(dim, name):
            return EinsumDense("abc,cde->abde", (None, self.num_heads, dim), bias_axes="de" if self.use_bias else None,
                               name=name, **self._sublayer_initializers())
        self.query_dense = heads(self.key_dim, "query")
        self.key_dense = heads(self.key_dim, "key")
        self.value_dense = heads(self.value_dim, "value")
        if self.dropout > 0:     # (Keras 3's Dropout sublayer is made here: its generator with it)
            self._dropout_generator = seed_generator.SeedGenerator(self.seed)
        self.output_dense = EinsumDense("abcd,cde->abe", (None,) + (self.output_shape_arg or (query_shape[-1],)),
                                        bias_axes="e" if self.use_bias else None, name="attention_output",
                                        **self._sublayer_initializers())
        head_shape = tuple(query_shape[:2]) + (self.num_heads, self.value_dim)
        with self._build_scope():
            for layer, shape in ((self.query_dense, query_shape), (self.key_dense, key_shape),
                                 (self.value_dense, value_shape), (self.output_dense, head_shape)):
                with context.name_scope(layer.name):
                    layer.build(shape)
        self.built = True

    def _sublayer_initializers(self):
        return dict(kernel_initializer=initializers.clone(self.kernel_initializer),
                    bias_initializer=initializers.clone(self.bias_initializer))

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        return tuple(query_shape[:-1]) + (self.output_shape_arg or (query_shape[-1],))

    def call(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        value = self._convert_input(value)
        key = value if key is None else self._convert_input(key)
        query_mask = get_keras_mask(query)
        for t in (query, value, key):
            set_keras_mask(t, None)
        if not hasattr(self, "query_dense"):
            self.build(tuple(query.shape.as_list()), tuple(value.shape.as_list()), tuple(key.shape.as_list()))
        mask = self._attention_mask(query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask,
                                    key_is_value=key is value)
        q = self.query_dense(query)                        # (B, T, N, key_dim)
        k, v = self.key_dense(key), self.value_dense(value)  # (B, S, N, key_dim), (B, S, N, value_dim)
        if mask is not None:
            mask = array_ops.expand_dims(mask, -3)         # one mask for every head
        scale = math_ops.cast(1.0 / math.sqrt(float(self.key_dim)), q.dtype)
        if self.dropout == 0 and not return_attention_scores:
            # Keras 3 then calls ops.dot_product_attention: logits scaled after the product, masked
            # ones set to -0.7 * float32's max, no zeroing after the softmax (a row with every key
            # masked, as a masked query's, attends uniformly)
            scores = math_ops.multiply(einsum.einsum("aecd,abcd->acbe", k, q), scale)
            if mask is not None:
                scores = math_ops.where(mask, scores, math_ops.cast(_DOT_PRODUCT_NEGATIVE[scores.dtype.name],
                                                                    scores.dtype))
            scores = nn_ops.softmax(scores, axis=-1)
        else:
            scores = einsum.einsum("aecd,abcd->acbe", k, math_ops.multiply(q, scale))    # (B, N, T, S)
            scores = self._softmax(scores, mask=mask)
        dropped = seed_generator.dropout(scores, self.dropout, None, self._dropout_generator) \
            if training and self.dropout > 0 else scores
        out = self.output_dense(einsum.einsum("acbe,aecd->abcd", dropped, v))
        if query_mask is not None:
            set_keras_mask(out, query_mask)
        return (out, scores) if return_attention_scores else out

    def _attention_mask(self, query, value, query_mask, value_mask, key_mask, attention_mask, causal, key_is_value):
        """Keras 3's merged mask (B or 1, T, S): query mask (B, T, 1) & value / key masks (B, 1, S)
        & the causal lower triangle (1, T, S) & ``attention_mask``; None when there is none."""
        masks = []
        if query_mask is not None:
            masks.append(array_ops.expand_dims(math_ops.cast(self._convert_input(query_mask), "bool"), -1))
        for m in (value_mask, None if key_is_value else key_mask):
            if m is not None:
                masks.append(array_ops.expand_dims(math_ops.cast(self._convert_input(m), "bool"), -2))
        if causal:
            t, s = query.shape.as_list()[1], value.shape.as_list()[1]
            masks.append(array_ops.constant(np.tril(np.ones((t, s), bool))[None]))
        if attention_mask is not None:
            masks.append(math_ops.cast(self._convert_input(attention_mask), "bool"))
        if not masks:
            return None
        out = masks[0]
        for m in masks[1:]:
            out = math_ops.logical_and(out, m)
        return out


class Attention(Layer):
    """Keras 3's dot-product (Luong) attention over ``[query, value]`` or ``[query, value, key]``:
    scores query . key (times a learned ``scale`` with ``use_scale``), or with ``score_mode="concat"``
    sum(tanh(query + key)) times a learned weight; a masked value step gets 1e9 subtracted
    from its scores (not zeroed after the softmax), a masked query step outputs zeros."""

    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if score_mode not in ("dot", "concat"):
            raise ValueError(f"Invalid value for argument score_mode. Expected one of {{'dot', 'concat'}}. "
                             f"Received: score_mode={score_mode}")
        self.use_scale, self.score_mode, self.dropout, self.seed = use_scale, score_mode, dropout, seed
        if dropout > 0:
            self.seed_generator = seed_generator.SeedGenerator(seed)

    def build(self, input_shape):
        self._validate_inputs(input_shape)
        self.scale = self.add_weight(name="scale", shape=(), initializer="ones") if self.use_scale else None
        self.concat_score_weight = self.add_weight(name="concat_score_weight", shape=(), initializer="ones") \
            if self.score_mode == "concat" else None
        self.built = True

    def _validate_inputs(self, inputs, mask=None):
        name = type(self).__name__
        if not isinstance(inputs, list):
            raise ValueError(f"{name} layer must be called on a list of inputs, namely [query, value] or "
                             f"[query, value, key]. Received: inputs={inputs}.")
        if not 2 <= len(inputs) <= 3:
            raise ValueError(f"{name} layer accepts inputs list of length 2 or 3, namely [query, value] or "
                             f"[query, value, key]. Received length: {len(inputs)}.")
        if mask is not None:
            if not isinstance(mask, list):
                raise ValueError(f"{name} layer mask must be a list, namely [query_mask, value_mask]. Received: "
                                 f"mask={mask}.")
            if not 2 <= len(mask) <= 3:
                raise ValueError(f"{name} layer accepts mask list of length 2 or 3. Received: inputs={inputs}, "
                                 f"mask={mask}.")

    def _scores(self, query, key):
        if self.score_mode == "dot":
            scores = linalg_ops.matmul(query, key, transpose_b=True)
            return scores * self.scale if self.scale is not None else scores
        pairs = array_ops.expand_dims(query, -2) + array_ops.expand_dims(key, -3)   # (B, Tq, Tv, dim)
        if self.scale is not None:
            pairs = self.scale * pairs
        return self.concat_score_weight * reduction_ops.reduce_sum(math_ops.tanh(pairs), axis=-1)

    def call(self, inputs, mask=None, training=False, return_attention_scores=False, use_causal_mask=False):
        self._validate_inputs(inputs, mask)
        query, value = inputs[0], self._convert_input(inputs[1])
        key = self._convert_input(inputs[2]) if len(inputs) > 2 else value
        q_mask = mask[0] if mask else None
        v_mask = mask[1] if mask else None
        scores = self._scores(query, key)                                   # (B, Tq, Tv)
        keep = None if v_mask is None else array_ops.expand_dims(math_ops.cast(self._convert_input(v_mask), "bool"),
                                                                 -2)
        if use_causal_mask:
            tq, tv = scores.shape.as_list()[-2], scores.shape.as_list()[-1]
            causal = array_ops.constant(np.tril(np.ones((tq, tv), bool))[None])
            keep = causal if keep is None else math_ops.logical_and(keep, causal)
        if keep is not None:
            large = 65504.0 if scores.dtype.name == "float16" else 1.0e9
            scores = math_ops.where(keep, scores, scores - math_ops.cast(large, scores.dtype))
        weights = nn_ops.softmax(scores, axis=-1)
        if training and self.dropout > 0:
            weights = seed_generator.dropout(weights, self.dropout, None, self.seed_generator)
        out = linalg_ops.matmul(weights, value)
        if q_mask is not None:
            q_keep = array_ops.expand_dims(math_ops.cast(self._convert_input(q_mask), "bool"), -1)
            out = math_ops.where(q_keep, out, math_ops.zeros_like(out))
        return (out, weights) if return_attention_scores else out

    def compute_mask(self, inputs, mask=None):
        self._validate_inputs(inputs, mask)
        if mask is None or mask[0] is None:
            return None
        return self._convert_input(mask[0])

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0][:-1]) + (input_shape[1][-1],)
