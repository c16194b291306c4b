"""Parity sweep of Keras layers, losses and metrics against real TensorFlow 2.21 (Keras 3).

    /work/benchenv/bin/python bench/keras_layer_parity.py [substring ...]

runs every case (or those whose name contains one of the substrings) twice, in two
subprocesses: once with ``tensorflow`` (PYTHONPATH empty) and once with ``jitgrad`` (this
checkout), and prints each array that differs, each exception that differs in type, and each
case one side lacks. A case returns named arrays: a layer's forward output (training False and
True), d sum(out * w) / d input and / d weights by GradientTape, the same in a tf.function,
model.predict, and the weights after one model.fit step (SGD, fixed data, shuffle=False). The
weights are set by set_weights from a numpy RNG seeded by the case name, so both sides see
the same numbers. Sections: LAYERS, LOSSES, METRICS (several update_state calls), MODELS
(compile / fit with partial batches, masks, weights, optimizers), EXTRA (one-off calls: masks,
shape edge cases, activations), BAD (bad arguments: only the exception type is compared) and
INITS (random initializers: statistics of a large draw, compared loosely). A whole run takes
several minutes per side; name substrings to run a part. ``--side tensorflow|jitgrad OUT.pkl``
runs one side (what the driver does); KERAS_PARITY_KEEP=1 keeps the two pickles.
TensorFlow is not a dependency of jitgrad: this is a tool.
"""
import os
import pickle
import subprocess
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [o for x in out for o in _flat(x)]
    if isinstance(out, dict):
        return [o for k in sorted(out) for o in _flat(out[k])]
    return [out]


def _np(x):
    return None if x is None else np.asarray(x)


def _set_weights(layer, rng):
    ws = []
    for v in layer.weights:
        shape = tuple(v.shape)
        if "variance" in v.name:
            ws.append(rng.uniform(0.5, 1.5, shape).astype(np.float32))
        else:
            ws.append(rng.uniform(-0.6, 0.6, shape).astype(np.float32))
    layer.set_weights(ws)
    return [w.shape for w in ws]


def layer_case(make, shapes, call=None, int_input=None, train=True, fit=True):
    """make(tf) -> layer; shapes: the input shapes (batch included); call(layer, xs, training)."""
    def run(tf, name, res):
        rng = rng_for(name)
        if int_input is not None:
            xs = [rng.integers(0, int_input, s).astype(np.int32) for s in shapes]
        else:
            xs = [rng.uniform(-1.5, 1.5, s).astype(np.float32) for s in shapes]
        layer = make(tf)
        cl = call or (lambda l, x, training: l(x[0] if len(x) == 1 else x, training=training))
        ct = [tf.constant(x) for x in xs]
        out0 = cl(layer, ct, False)
        res["weight_shapes"] = np.array(str([tuple(w.shape) for w in layer.weights]))
        _set_weights(layer, rng)
        outs = _flat(cl(layer, ct, False))
        for i, o in enumerate(outs):
            res[f"fwd{i}"] = _np(o)
        wouts = [rng.uniform(-1, 1, tuple(o.shape)).astype(np.float32) for o in outs]
        if train:
            for i, o in enumerate(_flat(cl(layer, ct, True))):
                res[f"fwd_train{i}"] = _np(o)
        floats = int_input is None

        def grads(training):
            with tf.GradientTape() as tape:
                if floats:
                    for c in ct:
                        tape.watch(c)
                loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32) * w)
                                 for o, w in zip(_flat(cl(layer, ct, training)), wouts)])
            srcs = (list(ct) if floats else []) + list(layer.trainable_weights)
            return loss, tape.gradient(loss, srcs)

        loss, gs = grads(False)
        res["loss"] = _np(loss)
        for i, g in enumerate(gs):
            res[f"grad{i}"] = _np(tf.convert_to_tensor(g)) if g is not None else np.array("None")
        if train:
            _, gs = grads(True)
            for i, g in enumerate(gs):
                res[f"grad_train{i}"] = _np(tf.convert_to_tensor(g)) if g is not None else np.array("None")
        if train:
            _, fgs = tf.function(lambda: grads(True))()
            for i, g in enumerate(fgs):
                res[f"fn_grad_train{i}"] = _np(tf.convert_to_tensor(g)) if g is not None else np.array("None")
            for i, w in enumerate(layer.weights):     # moving statistics after the training calls
                res[f"w_after_train{i}"] = _np(w)
        fn = tf.function(lambda *a: grads(False))
        floss, fgs = fn()
        res["fn_loss"] = _np(floss)
        for i, g in enumerate(fgs):
            res[f"fn_grad{i}"] = _np(tf.convert_to_tensor(g)) if g is not None else np.array("None")
        res["fn_fwd0"] = _np(tf.function(lambda: _flat(cl(layer, ct, False))[0])())
        if not fit or call is not None or len(shapes) != 1:
            return
        # a model around the layer: predict, and one SGD step of fit
        inp = tf.keras.Input(shape=shapes[0][1:], dtype="int32" if int_input else "float32")
        y = layer(inp)
        if isinstance(y, (list, tuple)):
            return
        model = tf.keras.Model(inp, y)
        res["predict"] = _np(model.predict(xs[0], verbose=0))
        target = rng.uniform(-1, 1, tuple(res["predict"].shape)).astype(np.float32)
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
        hist = model.fit(xs[0], target, batch_size=len(xs[0]), epochs=2, shuffle=False, verbose=0)
        res["fit_loss"] = np.array(hist.history["loss"], np.float32)
        for i, w in enumerate(model.get_weights()):
            res[f"fit_w{i}"] = np.asarray(w)
        res["eval"] = np.array(model.evaluate(xs[0], target, verbose=0), np.float32)
    return run


def L(tf):
    return tf.keras.layers


LAYERS = {
    "dense": layer_case(lambda tf: L(tf).Dense(3, activation="tanh"), [(4, 5)]),
    "dense_3d": layer_case(lambda tf: L(tf).Dense(3), [(2, 3, 5)]),
    "conv1d_valid": layer_case(lambda tf: L(tf).Conv1D(3, 3), [(2, 9, 4)]),
    "conv1d_same_stride": layer_case(lambda tf: L(tf).Conv1D(3, 3, strides=2, padding="same"), [(2, 9, 4)]),
    "conv1d_causal_dil": layer_case(lambda tf: L(tf).Conv1D(3, 2, dilation_rate=2, padding="causal"),
                                    [(2, 9, 4)]),
    "conv1d_groups": layer_case(lambda tf: L(tf).Conv1D(4, 3, groups=2), [(2, 9, 4)]),
    "conv2d_valid": layer_case(lambda tf: L(tf).Conv2D(3, 3), [(2, 7, 6, 2)]),
    "conv2d_same_s2": layer_case(lambda tf: L(tf).Conv2D(3, (3, 2), strides=2, padding="same"), [(2, 7, 6, 2)]),
    "conv2d_dil": layer_case(lambda tf: L(tf).Conv2D(2, 3, dilation_rate=(2, 1)), [(2, 8, 6, 2)]),
    "conv2d_groups": layer_case(lambda tf: L(tf).Conv2D(4, 3, groups=2, padding="same"), [(2, 6, 6, 4)]),
    "conv2d_relu_nobias": layer_case(lambda tf: L(tf).Conv2D(3, 2, activation="relu", use_bias=False),
                                     [(2, 5, 5, 2)]),
    "conv3d": layer_case(lambda tf: L(tf).Conv3D(2, 2, padding="same"), [(2, 4, 4, 3, 2)]),
    "conv2dT_valid": layer_case(lambda tf: L(tf).Conv2DTranspose(3, 3), [(2, 4, 5, 2)]),
    "conv2dT_same_s2": layer_case(lambda tf: L(tf).Conv2DTranspose(3, 3, strides=2, padding="same"),
                                  [(2, 4, 5, 2)]),
    "conv2dT_outpad": layer_case(lambda tf: L(tf).Conv2DTranspose(2, 3, strides=2, output_padding=1),
                                 [(2, 4, 3, 2)]),
    "conv2dT_dil": layer_case(lambda tf: L(tf).Conv2DTranspose(2, 3, dilation_rate=2), [(2, 4, 3, 2)]),
    "conv1dT": layer_case(lambda tf: L(tf).Conv1DTranspose(2, 3, strides=2, padding="same"), [(2, 5, 3)]),
    "depthwise": layer_case(lambda tf: L(tf).DepthwiseConv2D(3, depth_multiplier=2, padding="same"),
                            [(2, 5, 5, 3)]),
    "depthwise_s2": layer_case(lambda tf: L(tf).DepthwiseConv2D(2, strides=2), [(2, 6, 5, 2)]),
    "sepconv2d": layer_case(lambda tf: L(tf).SeparableConv2D(4, 3, depth_multiplier=2), [(2, 6, 6, 3)]),
    "sepconv2d_same_s2": layer_case(lambda tf: L(tf).SeparableConv2D(2, 3, strides=2, padding="same"),
                                    [(2, 7, 6, 3)]),
    "sepconv1d": layer_case(lambda tf: L(tf).SeparableConv1D(4, 3), [(2, 8, 3)]),
    "maxpool1d": layer_case(lambda tf: L(tf).MaxPooling1D(2), [(2, 7, 3)]),
    "maxpool1d_same": layer_case(lambda tf: L(tf).MaxPooling1D(3, strides=2, padding="same"), [(2, 7, 3)]),
    "avgpool1d_same": layer_case(lambda tf: L(tf).AveragePooling1D(3, strides=2, padding="same"), [(2, 7, 3)]),
    "maxpool2d": layer_case(lambda tf: L(tf).MaxPooling2D((2, 3)), [(2, 6, 7, 2)]),
    "avgpool2d_same": layer_case(lambda tf: L(tf).AveragePooling2D(3, strides=2, padding="same"),
                                 [(2, 6, 7, 2)]),
    "maxpool3d": layer_case(lambda tf: L(tf).MaxPooling3D(2), [(2, 4, 4, 4, 2)]),
    "avgpool3d": layer_case(lambda tf: L(tf).AveragePooling3D(2, padding="same"), [(2, 3, 4, 5, 2)]),
    "gap1d": layer_case(lambda tf: L(tf).GlobalAveragePooling1D(), [(2, 5, 3)]),
    "gmp1d": layer_case(lambda tf: L(tf).GlobalMaxPooling1D(), [(2, 5, 3)]),
    "gap2d": layer_case(lambda tf: L(tf).GlobalAveragePooling2D(), [(2, 3, 4, 3)]),
    "gap2d_keep": layer_case(lambda tf: L(tf).GlobalAveragePooling2D(keepdims=True), [(2, 3, 4, 3)]),
    "gmp2d": layer_case(lambda tf: L(tf).GlobalMaxPooling2D(), [(2, 3, 4, 3)]),
    "gap3d": layer_case(lambda tf: L(tf).GlobalAveragePooling3D(), [(2, 3, 2, 4, 3)]),
    "bn": layer_case(lambda tf: L(tf).BatchNormalization(), [(6, 4)]),
    "bn_mom_eps": layer_case(lambda tf: L(tf).BatchNormalization(momentum=0.5, epsilon=0.1), [(6, 4)]),
    "bn_axis1": layer_case(lambda tf: L(tf).BatchNormalization(axis=1), [(4, 3, 5)]),
    "bn_conv": layer_case(lambda tf: L(tf).BatchNormalization(center=False), [(3, 4, 4, 2)]),
    "bn_noscale": layer_case(lambda tf: L(tf).BatchNormalization(scale=False), [(3, 4, 2)]),
    "ln": layer_case(lambda tf: L(tf).LayerNormalization(), [(3, 5)]),
    "ln_axes": layer_case(lambda tf: L(tf).LayerNormalization(axis=[1, 2]), [(3, 4, 5)]),
    "ln_axis1": layer_case(lambda tf: L(tf).LayerNormalization(axis=1, epsilon=0.1), [(3, 4, 5)]),
    "ln_nocenter": layer_case(lambda tf: L(tf).LayerNormalization(center=False, scale=False), [(3, 5)]),
    "ln_rms": layer_case(lambda tf: L(tf).LayerNormalization(rms_scaling=True), [(3, 5)]),
    "groupnorm": layer_case(lambda tf: L(tf).GroupNormalization(groups=2), [(3, 4, 4)]),
    "unitnorm": layer_case(lambda tf: L(tf).UnitNormalization(), [(3, 5)]),
    "unitnorm_axes": layer_case(lambda tf: L(tf).UnitNormalization(axis=[1, 2]), [(3, 4, 5)]),
    "unitnorm_axis1": layer_case(lambda tf: L(tf).UnitNormalization(axis=1), [(3, 4, 5)]),
    "embedding": layer_case(lambda tf: L(tf).Embedding(7, 3), [(3, 4)], int_input=7),
    "lstm": layer_case(lambda tf: L(tf).LSTM(3), [(2, 5, 4)]),
    "lstm_seq_state": layer_case(lambda tf: L(tf).LSTM(3, return_sequences=True, return_state=True),
                                 [(2, 5, 4)]),
    "lstm_back": layer_case(lambda tf: L(tf).LSTM(3, go_backwards=True, return_sequences=True), [(2, 5, 4)]),
    "lstm_sig": layer_case(lambda tf: L(tf).LSTM(3, recurrent_activation="hard_sigmoid",
                                                 activation="relu", unit_forget_bias=False), [(2, 5, 4)]),
    "gru": layer_case(lambda tf: L(tf).GRU(3), [(2, 5, 4)]),
    "gru_noreset": layer_case(lambda tf: L(tf).GRU(3, reset_after=False, return_sequences=True), [(2, 5, 4)]),
    "gru_state_back": layer_case(lambda tf: L(tf).GRU(3, return_state=True, go_backwards=True), [(2, 5, 4)]),
    "simplernn": layer_case(lambda tf: L(tf).SimpleRNN(3, return_sequences=True), [(2, 5, 4)]),
    "simplernn_state": layer_case(lambda tf: L(tf).SimpleRNN(3, return_state=True, activation="relu"),
                                  [(2, 5, 4)]),
    "lstm_unroll_nobias": layer_case(lambda tf: L(tf).LSTM(3, unroll=True, use_bias=False, return_sequences=True),
                                     [(2, 4, 3)]),
    "gru_unroll_sig": layer_case(lambda tf: L(tf).GRU(3, unroll=True, recurrent_activation="hard_sigmoid",
                                                     activation="relu"), [(2, 4, 3)]),
    "gru_noreset_nobias": layer_case(lambda tf: L(tf).GRU(3, reset_after=False, use_bias=False), [(2, 4, 3)]),
    "simplernn_back_seq": layer_case(lambda tf: L(tf).SimpleRNN(3, go_backwards=True, return_sequences=True,
                                                                use_bias=False), [(2, 4, 3)]),
    "rnn_lstmcell": layer_case(lambda tf: L(tf).RNN(L(tf).LSTMCell(3), return_sequences=True), [(2, 4, 3)]),
    "rnn_stacked_cells": layer_case(lambda tf: L(tf).RNN([L(tf).GRUCell(3), L(tf).SimpleRNNCell(2)],
                                                         return_state=True), [(2, 4, 3)]),
    "bidi_state": layer_case(lambda tf: L(tf).Bidirectional(L(tf).LSTM(2, return_state=True)), [(2, 4, 3)]),
    "bidi_gru_seq_state": layer_case(lambda tf: L(tf).Bidirectional(L(tf).GRU(2, return_sequences=True,
                                                                              return_state=True), merge_mode="ave"),
                                     [(2, 4, 3)]),
    "bidi_backward_layer": layer_case(lambda tf: L(tf).Bidirectional(
        L(tf).LSTM(2, return_sequences=True), backward_layer=L(tf).GRU(3, return_sequences=True, go_backwards=True)),
        [(2, 4, 3)]),
    "td_conv": layer_case(lambda tf: L(tf).TimeDistributed(L(tf).Conv1D(2, 2)), [(2, 3, 5, 2)]),
    "bidi_concat": layer_case(lambda tf: L(tf).Bidirectional(L(tf).LSTM(3, return_sequences=True)),
                              [(2, 4, 3)]),
    "bidi_sum": layer_case(lambda tf: L(tf).Bidirectional(L(tf).GRU(2), merge_mode="sum"), [(2, 4, 3)]),
    "bidi_mul": layer_case(lambda tf: L(tf).Bidirectional(L(tf).SimpleRNN(2), merge_mode="mul"), [(2, 4, 3)]),
    "bidi_ave": layer_case(lambda tf: L(tf).Bidirectional(L(tf).SimpleRNN(2), merge_mode="ave"), [(2, 4, 3)]),
    "bidi_none": layer_case(lambda tf: L(tf).Bidirectional(L(tf).SimpleRNN(2), merge_mode=None), [(2, 4, 3)]),
    "mha": layer_case(lambda tf: L(tf).MultiHeadAttention(2, 3),
                      [(2, 4, 5), (2, 3, 5)], call=lambda l, x, training: l(x[0], x[1], training=training)),
    "mha_self_vdim": layer_case(lambda tf: L(tf).MultiHeadAttention(2, 3, value_dim=4, output_shape=6),
                                [(2, 4, 5)], call=lambda l, x, training: l(x[0], x[0], training=training)),
    "mha_scores": layer_case(lambda tf: L(tf).MultiHeadAttention(2, 2),
                             [(2, 3, 4), (2, 5, 4)],
                             call=lambda l, x, training: l(x[0], x[1], return_attention_scores=True,
                                                           training=training)),
    "attention": layer_case(lambda tf: L(tf).Attention(), [(2, 3, 4), (2, 5, 4)]),
    "attention_scale": layer_case(lambda tf: L(tf).Attention(use_scale=True, score_mode="concat"),
                                  [(2, 3, 4), (2, 5, 4)]),
    "attention_causal": layer_case(lambda tf: L(tf).Attention(),
                                   [(2, 4, 3), (2, 4, 3)],
                                   call=lambda l, x, training: l(x, use_causal_mask=True, training=training)),
    "attention_kqv": layer_case(lambda tf: L(tf).Attention(), [(2, 3, 4), (2, 5, 4), (2, 5, 4)]),
    "additive_attention": layer_case(lambda tf: L(tf).AdditiveAttention(), [(2, 3, 4), (2, 5, 4)]),
    "flatten": layer_case(lambda tf: L(tf).Flatten(), [(2, 3, 4)]),
    "reshape": layer_case(lambda tf: L(tf).Reshape((2, -1)), [(2, 3, 4)]),
    "permute": layer_case(lambda tf: L(tf).Permute((2, 1)), [(2, 3, 4)]),
    "repeatvector": layer_case(lambda tf: L(tf).RepeatVector(3), [(2, 4)]),
    "upsampling1d": layer_case(lambda tf: L(tf).UpSampling1D(2), [(2, 3, 2)]),
    "upsampling2d": layer_case(lambda tf: L(tf).UpSampling2D((2, 3)), [(2, 3, 2, 2)]),
    "upsampling2d_bil": layer_case(lambda tf: L(tf).UpSampling2D(2, interpolation="bilinear"), [(2, 3, 2, 2)]),
    "zeropad1d": layer_case(lambda tf: L(tf).ZeroPadding1D((1, 2)), [(2, 3, 2)]),
    "zeropad2d": layer_case(lambda tf: L(tf).ZeroPadding2D(((1, 0), (2, 1))), [(2, 3, 2, 2)]),
    "cropping1d": layer_case(lambda tf: L(tf).Cropping1D((1, 2)), [(2, 6, 2)]),
    "cropping2d": layer_case(lambda tf: L(tf).Cropping2D(((1, 0), (2, 1))), [(2, 4, 5, 2)]),
    "concat": layer_case(lambda tf: L(tf).Concatenate(axis=1), [(2, 3), (2, 4)]),
    "add": layer_case(lambda tf: L(tf).Add(), [(2, 3), (2, 3), (2, 3)]),
    "subtract": layer_case(lambda tf: L(tf).Subtract(), [(2, 3), (2, 3)]),
    "multiply": layer_case(lambda tf: L(tf).Multiply(), [(2, 3), (2, 3)]),
    "average": layer_case(lambda tf: L(tf).Average(), [(2, 3), (2, 3), (2, 3)]),
    "maximum": layer_case(lambda tf: L(tf).Maximum(), [(2, 3), (2, 3)]),
    "minimum": layer_case(lambda tf: L(tf).Minimum(), [(2, 3), (2, 3)]),
    "dot": layer_case(lambda tf: L(tf).Dot(axes=1), [(2, 3), (2, 3)]),
    "dot_norm": layer_case(lambda tf: L(tf).Dot(axes=1, normalize=True), [(2, 3), (2, 3)]),
    "dot_3d": layer_case(lambda tf: L(tf).Dot(axes=(2, 2)), [(2, 3, 4), (2, 5, 4)]),
    "dot_3d_norm": layer_case(lambda tf: L(tf).Dot(axes=(1, 1), normalize=True), [(2, 3, 4), (2, 3, 5)]),
    "relu_args": layer_case(lambda tf: L(tf).ReLU(max_value=0.8, threshold=0.2, negative_slope=0.1), [(3, 5)]),
    "relu_max": layer_case(lambda tf: L(tf).ReLU(max_value=0.5), [(3, 5)]),
    "leakyrelu": layer_case(lambda tf: L(tf).LeakyReLU(negative_slope=0.2), [(3, 5)]),
    "leakyrelu_default": layer_case(lambda tf: L(tf).LeakyReLU(), [(3, 5)]),
    "prelu": layer_case(lambda tf: L(tf).PReLU(), [(3, 4, 5)]),
    "prelu_shared": layer_case(lambda tf: L(tf).PReLU(shared_axes=[1]), [(3, 4, 5)]),
    "elu": layer_case(lambda tf: L(tf).ELU(alpha=0.7), [(3, 5)]),
    "softmax": layer_case(lambda tf: L(tf).Softmax(), [(3, 5)]),
    "softmax_axis": layer_case(lambda tf: L(tf).Softmax(axis=1), [(3, 4, 5)]),
    "softmax_axes": layer_case(lambda tf: L(tf).Softmax(axis=(1, 2)), [(3, 4, 5)]),
    "softmax_mask": layer_case(lambda tf: L(tf).Softmax(), [(3, 5)],
                               call=lambda l, x, training: l(x[0], mask=tf_mask(x[0]))),
    "activation_gelu": layer_case(lambda tf: L(tf).Activation("gelu"), [(3, 5)]),
    "activation_selu": layer_case(lambda tf: L(tf).Activation("selu"), [(3, 5)]),
    "dropout_eval": layer_case(lambda tf: L(tf).Dropout(0.5), [(3, 5)], train=False, fit=False),
    "spatialdropout_eval": layer_case(lambda tf: L(tf).SpatialDropout1D(0.5), [(3, 4, 5)], train=False,
                                      fit=False),
    "gaussnoise_eval": layer_case(lambda tf: L(tf).GaussianNoise(0.5), [(3, 5)], train=False, fit=False),
    "gaussdropout_eval": layer_case(lambda tf: L(tf).GaussianDropout(0.5), [(3, 5)], train=False, fit=False),
    "timedistributed": layer_case(lambda tf: L(tf).TimeDistributed(L(tf).Dense(2)), [(2, 3, 4)]),
    "einsumdense": layer_case(lambda tf: L(tf).EinsumDense("abc,cd->abd", output_shape=(None, 3),
                                                           bias_axes="d"), [(2, 3, 4)]),
}


def model_case(make, inputs, target, loss="mse", metrics=None, n=7, batch_size=3, epochs=2, fit_kw=None,
               compile_kw=None, optimizer=None):
    """make(tf) -> a Model over inputs [(shape without batch, "float" | int vocabulary)]; fit with
    batch_size not dividing n (a partial last batch), history, evaluate, predict and the weights."""
    def run(tf, name, res):
        rng = rng_for(name)
        xs = [rng.integers(0, kind, (n,) + shape).astype(np.int32) if isinstance(kind, int)
              else rng.uniform(-1.5, 1.5, (n,) + shape).astype(np.float32) for shape, kind in inputs]
        model = make(tf)
        model.set_weights([rng.uniform(0.5, 1.5, tuple(w.shape)).astype(np.float32) if "variance" in w.name
                           else rng.uniform(-0.6, 0.6, tuple(w.shape)).astype(np.float32) for w in model.weights])
        x = xs[0] if len(xs) == 1 else xs
        pred = model.predict(x, verbose=0, batch_size=batch_size)
        if isinstance(pred, (list, tuple)):
            for i, p in enumerate(pred):
                res[f"predict{i}"] = np.asarray(p)
            res["predict"] = np.asarray(pred[0])
        else:
            res["predict"] = _np(pred)
        if isinstance(res["predict"], np.ndarray) and res["predict"].dtype == object:
            pass
        y = target(rng, res["predict"].shape) if not isinstance(target, tuple) else [
            t(rng, p.shape) for t, p in zip(target, model.predict(x, verbose=0))]
        kw = dict(fit_kw or {})
        for key in ("sample_weight",):
            if kw.get(key) == "rng":
                kw[key] = rng.uniform(0, 2, (n,)).astype(np.float32)
        opt = optimizer(tf) if optimizer else tf.keras.optimizers.SGD(0.1)
        model.compile(optimizer=opt, loss=loss(tf) if callable(loss) else loss, metrics=metrics, **(compile_kw or {}))
        hist = model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0, **kw)
        for key in sorted(hist.history):
            res[f"hist_{key}"] = np.array(hist.history[key], np.float64)
        ev = model.evaluate(x, y, batch_size=batch_size, verbose=0, return_dict=True)
        for key in sorted(ev):
            res[f"eval_{key}"] = np.array(ev[key], np.float64)
        for i, w in enumerate(model.get_weights()):
            res[f"w{i}"] = np.asarray(w)
        for i, p in enumerate(_flat(model.predict(x, verbose=0))):
            res[f"predict_after{i}"] = np.asarray(p)
    return run


def _seq(tf, *layers, shape):
    return tf.keras.Sequential([tf.keras.Input(shape=shape)] + list(layers))


def _onehot(rng, shape):
    return np.eye(shape[-1], dtype=np.float32)[rng.integers(0, shape[-1], shape[:-1])]


def _sparse(rng, shape):
    return rng.integers(0, shape[-1], shape[:-1]).astype(np.int32)


def _real(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _binary(rng, shape):
    return rng.integers(0, 2, shape).astype(np.float32)


def _masked_rnn(rnn, pool=False):
    def make(tf):
        inp = tf.keras.Input(shape=(6,), dtype="int32")
        h = L(tf).Embedding(5, 3, mask_zero=True)(inp)
        h = rnn(tf)(h)
        if pool:
            h = L(tf).GlobalAveragePooling1D()(h)
        return tf.keras.Model(inp, L(tf).Dense(2)(h))
    return make


MODELS = {
    "model_mlp_sparse_acc": model_case(lambda tf: _seq(tf, L(tf).Dense(4, activation="relu"), L(tf).Dense(3),
                                                       shape=(5,)), [((5,), "float")], _sparse,
                                       loss=lambda tf: tf.keras.losses.SparseCategoricalCrossentropy(
                                           from_logits=True), metrics=["accuracy"]),
    "model_mlp_cce_acc": model_case(lambda tf: _seq(tf, L(tf).Dense(4, activation="tanh"),
                                                    L(tf).Dense(3, activation="softmax"), shape=(5,)),
                                    [((5,), "float")], _onehot, loss="categorical_crossentropy",
                                    metrics=["accuracy", "mae"]),
    "model_mlp_bce_acc": model_case(lambda tf: _seq(tf, L(tf).Dense(1, activation="sigmoid"), shape=(4,)),
                                    [((4,), "float")], _binary, loss="binary_crossentropy",
                                    metrics=["accuracy"]),
    "model_mlp_sw": model_case(lambda tf: _seq(tf, L(tf).Dense(2), shape=(3,)), [((3,), "float")], _real,
                               metrics=["mae"], fit_kw={"sample_weight": "rng"}),
    "model_mlp_classweight": model_case(lambda tf: _seq(tf, L(tf).Dense(3), shape=(3,)), [((3,), "float")],
                                        _sparse, metrics=["accuracy"],
                                        fit_kw={"class_weight": {0: 0.5, 1: 2.0, 2: 1.0}}),
    "model_mlp_valsplit": model_case(lambda tf: _seq(tf, L(tf).Dense(2), shape=(3,)), [((3,), "float")], _real,
                                     metrics=["mse"], n=10, fit_kw={"validation_split": 0.3}),
    "model_l2": model_case(lambda tf: _seq(tf, L(tf).Dense(2, kernel_regularizer=tf.keras.regularizers.L2(0.1),
                                                           bias_regularizer="l1"), shape=(3,)),
                           [((3,), "float")], _real),
    "model_bn_fit": model_case(lambda tf: _seq(tf, L(tf).Dense(4), L(tf).BatchNormalization(momentum=0.8),
                                               L(tf).Dense(1), shape=(3,)), [((3,), "float")], _real, epochs=3),
    "model_dropout_fit": model_case(lambda tf: _seq(tf, L(tf).Dense(4), L(tf).Dropout(0.0), L(tf).Dense(1),
                                                    shape=(3,)), [((3,), "float")], _real),
    "model_masked_lstm": model_case(_masked_rnn(lambda tf: L(tf).LSTM(3)), [((6,), 5)], _real),
    "model_masked_gru_seq": model_case(_masked_rnn(lambda tf: L(tf).GRU(3, return_sequences=True), pool=True),
                                       [((6,), 5)], _real),
    "model_masked_rnn_back": model_case(_masked_rnn(lambda tf: L(tf).SimpleRNN(3, go_backwards=True)),
                                        [((6,), 5)], _real),
    "model_masked_bidi": model_case(_masked_rnn(lambda tf: L(tf).Bidirectional(L(tf).LSTM(2))), [((6,), 5)],
                                    _real),
    "model_masked_seq_loss": model_case(
        lambda tf: _seq(tf, L(tf).Embedding(5, 3, mask_zero=True), L(tf).LSTM(2, return_sequences=True),
                        shape=(6,)), [((6,), 5)], _real, metrics=["mae"]),
    "model_masking_layer": model_case(
        lambda tf: _seq(tf, L(tf).Masking(0.0), L(tf).GRU(2), shape=(4, 3)), [((4, 3), 2)], _real),
    "model_conv_pool": model_case(
        lambda tf: _seq(tf, L(tf).Conv2D(2, 3, padding="same", activation="relu"), L(tf).MaxPooling2D(),
                        L(tf).Flatten(), L(tf).Dense(3, activation="softmax"), shape=(4, 4, 1)),
        [((4, 4, 1), "float")], _sparse, loss="sparse_categorical_crossentropy",
        metrics=["sparse_categorical_accuracy", "sparse_top_k_categorical_accuracy"]),
    "model_precision_recall": model_case(lambda tf: _seq(tf, L(tf).Dense(1, activation="sigmoid"), shape=(4,)),
                                         [((4,), "float")], _binary, loss="binary_crossentropy",
                                         metrics=["precision", "recall"]),
    "model_from_logits": model_case(
        lambda tf: _seq(tf, L(tf).Dense(3), shape=(4,)), [((4,), "float")], _onehot,
        loss=lambda tf: tf.keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
        metrics=["categorical_accuracy"]),
    "model_emb_sgd_momentum": model_case(
        lambda tf: _seq(tf, L(tf).Embedding(6, 3), L(tf).Flatten(), L(tf).Dense(1), shape=(4,)), [((4,), 6)], _real,
        optimizer=lambda tf: tf.keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True), epochs=3),
    "model_emb_adam": model_case(
        lambda tf: _seq(tf, L(tf).Embedding(6, 3), L(tf).GlobalAveragePooling1D(), L(tf).Dense(1), shape=(4,)),
        [((4,), 6)], _real, optimizer=lambda tf: tf.keras.optimizers.Adam(0.05), epochs=3),
    "model_emb_rmsprop": model_case(
        lambda tf: _seq(tf, L(tf).Embedding(6, 3), L(tf).Flatten(), L(tf).Dense(1), shape=(4,)), [((4,), 6)], _real,
        optimizer=lambda tf: tf.keras.optimizers.RMSprop(0.05, momentum=0.5), epochs=3),
    "model_emb_adagrad": model_case(
        lambda tf: _seq(tf, L(tf).Embedding(6, 3), L(tf).Flatten(), L(tf).Dense(1), shape=(4,)), [((4,), 6)], _real,
        optimizer=lambda tf: tf.keras.optimizers.Adagrad(0.1), epochs=3),
    "model_emb_adamw": model_case(
        lambda tf: _seq(tf, L(tf).Embedding(6, 3), L(tf).Flatten(), L(tf).Dense(1), shape=(4,)), [((4,), 6)], _real,
        optimizer=lambda tf: tf.keras.optimizers.AdamW(0.05, weight_decay=0.1), epochs=3),
    "model_masked_dense_seq": model_case(
        lambda tf: _seq(tf, L(tf).Embedding(5, 3, mask_zero=True), L(tf).Dense(2), shape=(6,)), [((6,), 5)], _real,
        metrics=["mae"]),
    "model_masked_td": model_case(
        lambda tf: _seq(tf, L(tf).Embedding(5, 3, mask_zero=True), L(tf).TimeDistributed(L(tf).Dense(2)),
                        shape=(6,)), [((6,), 5)], _real),
    "model_multi_output": model_case(
        lambda tf: (lambda i: tf.keras.Model(i, [L(tf).Dense(2, name="a")(i), L(tf).Dense(1, name="b")(i)]))(
            tf.keras.Input((3,))), [((3,), "float")], (_real, _real), loss=["mse", "mae"],
        metrics=[["mae"], ["mse"]], compile_kw={"loss_weights": [1.0, 0.5]}),
    "model_multi_output_plain": model_case(
        lambda tf: (lambda i: tf.keras.Model(i, [L(tf).Dense(2, name="a")(i), L(tf).Dense(1, name="b")(i)]))(
            tf.keras.Input((3,))), [((3,), "float")], (_real, _real), loss=["mse", "mae"]),
    "model_multi_output_metrics": model_case(
        lambda tf: (lambda i: tf.keras.Model(i, [L(tf).Dense(2, name="a")(i), L(tf).Dense(1, name="b")(i)]))(
            tf.keras.Input((3,))), [((3,), "float")], (_real, _real), loss="mse", metrics=[["mae"], ["mse"]]),
    "model_two_inputs": model_case(
        lambda tf: (lambda a, b: tf.keras.Model([a, b], L(tf).Dense(2)(L(tf).Concatenate()([a, b]))))(
            tf.keras.Input((3,)), tf.keras.Input((2,))), [((3,), "float"), ((2,), "float")], _real),
    "model_sum_reduction": model_case(
        lambda tf: _seq(tf, L(tf).Dense(2), shape=(3,)), [((3,), "float")], _real,
        loss=lambda tf: tf.keras.losses.MeanSquaredError(reduction="sum")),
    "model_weighted_metrics": model_case(
        lambda tf: _seq(tf, L(tf).Dense(3), shape=(3,)), [((3,), "float")], _sparse,
        loss=lambda tf: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"], compile_kw={"weighted_metrics": ["accuracy"]}, fit_kw={"sample_weight": "rng"}),
    "model_stacked_rnn": model_case(
        lambda tf: _seq(tf, L(tf).LSTM(3, return_sequences=True), L(tf).GRU(2, reset_after=False),
                        L(tf).Dense(1), shape=(4, 2)), [((4, 2), "float")], _real),
    "model_conv1d_pool": model_case(
        lambda tf: _seq(tf, L(tf).Conv1D(3, 3, strides=2, padding="causal"), L(tf).AveragePooling1D(2,
                        padding="same"), L(tf).GlobalMaxPooling1D(), L(tf).Dense(1), shape=(9, 2)),
        [((9, 2), "float")], _real),
    "model_ln_gelu": model_case(
        lambda tf: _seq(tf, L(tf).Dense(4), L(tf).LayerNormalization(), L(tf).Activation("gelu"), L(tf).Dense(1),
                        shape=(3,)), [((3,), "float")], _real, optimizer=lambda tf: tf.keras.optimizers.Adam(0.01)),
    "model_mha": model_case(
        lambda tf: (lambda i: tf.keras.Model(i, L(tf).GlobalAveragePooling1D()(
            L(tf).MultiHeadAttention(2, 2)(i, i, use_causal_mask=True))))(tf.keras.Input((4, 3))),
        [((4, 3), "float")], _real),
}


def _fn_case(body):
    """body(tf, rng) -> dict of arrays (or tensors); for one-off calls."""
    def run(tf, name, res):
        rng = rng_for(name)
        for k, v in body(tf, rng).items():
            res[k] = np.asarray(v)
    return run


def _loss_fn(fn, kind, shape=(4, 3), **kw):
    def body(tf, rng):
        yt, yp = _loss_inputs(rng, kind, shape)
        return {"v": getattr(tf.keras.losses, fn)(yt, yp, **kw)}
    return _fn_case(body)


def _act(name, **kw):
    def body(tf, rng):
        x = tf.constant(rng.uniform(-4, 4, (3, 6)).astype(np.float32))
        w = rng.uniform(-1, 1, (3, 6)).astype(np.float32)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = getattr(tf.keras.activations, name)(x, **kw)
            loss = tf.reduce_sum(y * w)
        return {"y": y, "g": tape.gradient(loss, x)}
    return _fn_case(body)


def _shape_loss(cls, yt_shape, yp_shape, sw_shape=None, kind="real", **kw):
    def body(tf, rng):
        if kind == "int":
            yt = rng.integers(0, 2, yt_shape).astype(np.int32)
            yp = rng.uniform(0.05, 0.95, yp_shape).astype(np.float32)
        else:
            yt = rng.uniform(-1, 1, yt_shape).astype(np.float32)
            yp = rng.uniform(-1, 1, yp_shape).astype(np.float32)
        sw = None if sw_shape is None else rng.uniform(0, 2, sw_shape).astype(np.float32)
        return {"v": getattr(tf.keras.losses, cls)(**kw)(yt, yp, sample_weight=sw)}
    return _fn_case(body)


def _shape_metric(cls, yt_shape, yp_shape, sw_shape=None, kind="real", **kw):
    def body(tf, rng):
        m = getattr(tf.keras.metrics, cls)(**kw)
        out = {}
        for i in range(2):
            if kind == "int":
                yt = rng.integers(0, yp_shape[-1] if len(yp_shape) > 1 and yp_shape[-1] > 1 else 2,
                                  yt_shape).astype(np.int32)
                yp = rng.uniform(0.05, 0.95, yp_shape).astype(np.float32)
            else:
                yt = rng.uniform(-1, 1, yt_shape).astype(np.float32)
                yp = rng.uniform(-1, 1, yp_shape).astype(np.float32)
            sw = None if sw_shape is None else rng.uniform(0, 2, sw_shape).astype(np.float32)
            m.update_state(yt, yp, sample_weight=sw)
            out[f"r{i}"] = m.result()
        return out
    return _fn_case(body)


def _mha_mask(tf, rng):
    layer = L(tf).MultiHeadAttention(2, 2, attention_axes=None)
    q = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    v = rng.uniform(-1, 1, (2, 5, 4)).astype(np.float32)
    m = rng.integers(0, 2, (2, 3, 5)).astype(bool)
    m[..., 0] = True
    layer(q, v)
    _set_weights(layer, rng)
    return {"out": layer(q, v, attention_mask=m)}


def _mha_axes(tf, rng):
    layer = L(tf).MultiHeadAttention(2, 2, attention_axes=(1, 2))
    q = rng.uniform(-1, 1, (2, 3, 2, 4)).astype(np.float32)
    layer(q, q)
    _set_weights(layer, rng)
    return {"out": layer(q, q)}


def _attention_masks(tf, rng):
    layer = L(tf).Attention(use_scale=True)
    q = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    v = rng.uniform(-1, 1, (2, 5, 4)).astype(np.float32)
    qm = np.array([[1, 1, 0], [1, 0, 1]], bool)
    vm = np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]], bool)
    layer([q, v])
    _set_weights(layer, rng)
    out, sc = layer([q, v], mask=[qm, vm], return_attention_scores=True)
    return {"out": out, "scores": sc}


def _lstm_initial_state(tf, rng):
    layer = L(tf).LSTM(3, return_sequences=True)
    x = rng.uniform(-1, 1, (2, 4, 2)).astype(np.float32)
    h0, c0 = (rng.uniform(-1, 1, (2, 3)).astype(np.float32) for _ in range(2))
    layer(x)
    _set_weights(layer, rng)
    return {"out": layer(x, initial_state=[h0, c0])}


def _gru_initial_state(tf, rng):
    layer = L(tf).GRU(3, return_state=True)
    x = rng.uniform(-1, 1, (2, 4, 2)).astype(np.float32)
    h0 = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    layer(x)
    _set_weights(layer, rng)
    return {"out": layer(x, initial_state=h0)[0], "state": layer(x, initial_state=h0)[1]}


def _rnn_dropout_eval(tf, rng):
    layer = L(tf).LSTM(3, dropout=0.5, recurrent_dropout=0.5)
    x = rng.uniform(-1, 1, (2, 4, 2)).astype(np.float32)
    layer(x)
    _set_weights(layer, rng)
    return {"out": layer(x, training=False)}


def _rnn_mask_call(tf, rng):
    out = {}
    for kind in ("LSTM", "GRU", "SimpleRNN"):
        layer = getattr(L(tf), kind)(3, return_sequences=True, return_state=True)
        x = rng.uniform(-1, 1, (2, 5, 2)).astype(np.float32)
        m = np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 0]], bool)
        layer(x)
        _set_weights(layer, rng)
        for i, o in enumerate(layer(x, mask=m)):
            out[f"{kind}{i}"] = o
    return out


def _softmax_mask_3d(tf, rng):
    x = rng.uniform(-2, 2, (2, 3, 4)).astype(np.float32)
    m = rng.integers(0, 2, (2, 3, 4)).astype(bool)
    m[..., 0] = True
    return {"last": L(tf).Softmax()(x, mask=m), "axis1": L(tf).Softmax(axis=1)(x, mask=m)}


def _global_pool_mask(tf, rng):
    x = rng.uniform(-2, 2, (2, 4, 3)).astype(np.float32)
    m = np.array([[1, 1, 0, 0], [1, 0, 1, 1]], bool)
    return {"avg": L(tf).GlobalAveragePooling1D()(x, mask=m), "max": L(tf).GlobalMaxPooling1D()(x, mask=m)}


def _conv_T_same_outpad(tf, rng):
    layer = L(tf).Conv2DTranspose(2, 3, strides=3, padding="same", output_padding=2)
    x = rng.uniform(-1, 1, (1, 2, 3, 2)).astype(np.float32)
    layer(x)
    _set_weights(layer, rng)
    return {"out": layer(x)}


def _bn_eval_after_fn_training(tf, rng):
    layer = L(tf).BatchNormalization(momentum=0.7)
    x = rng.uniform(-1, 3, (5, 3)).astype(np.float32)
    layer(x)
    step = tf.function(lambda t: layer(t, training=True))
    for _ in range(3):
        step(tf.constant(x))
    return {"mm": layer.moving_mean, "mv": layer.moving_variance, "eval": layer(x, training=False)}


def _dense_int(tf, rng):
    layer = L(tf).Dense(2, kernel_initializer="ones")
    return {"out": layer(np.array([[1, 2], [3, 4]], np.int32))}


def _timedistributed_conv(tf, rng):
    layer = L(tf).TimeDistributed(L(tf).Conv2D(2, 2))
    x = rng.uniform(-1, 1, (2, 3, 4, 4, 1)).astype(np.float32)
    layer(x)
    _set_weights(layer, rng)
    return {"out": layer(x)}


EXTRA = {
    "fn_bce_logits_ls": _loss_fn("binary_crossentropy", "logit", from_logits=True, label_smoothing=0.2),
    "fn_cce_logits": _loss_fn("categorical_crossentropy", "catlogit", from_logits=True, label_smoothing=0.1),
    "fn_scce": _loss_fn("sparse_categorical_crossentropy", "sparselogit", from_logits=True),
    "fn_huber": _loss_fn("huber", "real", delta=0.5),
    "fn_msle": _loss_fn("mean_squared_logarithmic_error", "pos"),
    "fn_cos": _loss_fn("cosine_similarity", "real", axis=0),
    "fn_bfce": _loss_fn("binary_focal_crossentropy", "prob", gamma=3.0),
    "sl_mse_n_n1": _shape_loss("MeanSquaredError", (4,), (4, 1)),
    "sl_mse_n1_n": _shape_loss("MeanSquaredError", (4, 1), (4,)),
    "sl_mse_sw_n1": _shape_loss("MeanSquaredError", (4, 3), (4, 3), (4, 1)),
    "sl_mse_sw_full": _shape_loss("MeanSquaredError", (4, 3), (4, 3), (4, 3)),
    "sl_mse_sw_scalar": _shape_loss("MeanSquaredError", (4, 3), (4, 3), ()),
    "sl_mse_mean_sw": _shape_loss("MeanSquaredError", (4, 3), (4, 3), (4,), reduction="mean_with_sample_weight"),
    "sl_bce_int": _shape_loss("BinaryCrossentropy", (4,), (4, 1), (4,), kind="int"),
    "sl_bce_1d": _shape_loss("BinaryCrossentropy", (4,), (4,), kind="int"),
    "sl_scce_n1": _shape_loss("SparseCategoricalCrossentropy", (4, 1), (4, 3), (4, 1), kind="int"),
    "sm_binacc_n_n1": _shape_metric("BinaryAccuracy", (5,), (5, 1), kind="int"),
    "sm_binacc_sw_n1": _shape_metric("BinaryAccuracy", (5, 2), (5, 2), (5, 1), kind="int"),
    "sm_binacc_sw_full": _shape_metric("BinaryAccuracy", (5, 2), (5, 2), (5, 2), kind="int"),
    "sm_sparse_acc_n1": _shape_metric("SparseCategoricalAccuracy", (5, 1), (5, 3), (5,), kind="int"),
    "sm_mse_sw_n1": _shape_metric("MeanSquaredError", (5, 2), (5, 2), (5, 1)),
    "sm_mse_1d": _shape_metric("MeanSquaredError", (5,), (5,), (5,)),
    "sm_mae_3d_sw": _shape_metric("MeanAbsoluteError", (2, 3, 4), (2, 3, 4), (2, 3)),
    "sm_rmse_3d": _shape_metric("RootMeanSquaredError", (2, 3, 4), (2, 3, 4), (2, 3)),
    "sm_cos_sw": _shape_metric("CosineSimilarity", (4, 3), (4, 3), (4,)),
    "mha_mask": _fn_case(_mha_mask),
    "mha_axes": _fn_case(_mha_axes),
    "attention_masks": _fn_case(_attention_masks),
    "lstm_initial_state": _fn_case(_lstm_initial_state),
    "gru_initial_state": _fn_case(_gru_initial_state),
    "rnn_dropout_eval": _fn_case(_rnn_dropout_eval),
    "rnn_mask_call": _fn_case(_rnn_mask_call),
    "softmax_mask_3d": _fn_case(_softmax_mask_3d),
    "global_pool_mask": _fn_case(_global_pool_mask),
    "conv2dT_same_outpad": _fn_case(_conv_T_same_outpad),
    "bn_fn_training": _fn_case(_bn_eval_after_fn_training),
    "dense_int": _fn_case(_dense_int),
    "timedistributed_conv": _fn_case(_timedistributed_conv),
}
for _a in ["relu", "relu6", "leaky_relu", "elu", "selu", "sigmoid", "tanh", "softmax", "log_softmax", "softplus",
           "softsign", "silu", "gelu", "exponential", "celu", "glu", "hard_sigmoid", "hard_silu", "hard_tanh",
           "hard_shrink", "soft_shrink", "tanh_shrink", "sparse_plus", "sparse_sigmoid", "squareplus",
           "log_sigmoid", "mish", "linear", "swish", "hard_swish"]:
    EXTRA[f"act_{_a}"] = _act(_a)
EXTRA.update({"act_gelu_approx": _act("gelu", approximate=True), "act_relu_args": _act("relu", negative_slope=0.1,
                                                                                        max_value=2.0, threshold=0.5),
              "act_elu_alpha": _act("elu", alpha=0.3), "act_softmax_axis0": _act("softmax", axis=0),
              "act_leaky": _act("leaky_relu", negative_slope=0.05), "act_celu": _act("celu", alpha=2.0),
              "act_threshold": _act("threshold", threshold=0.5, default_value=-1.0)})


def _bad(fn):
    """fn(tf, x) with bad arguments: the case records the exception type each side raises."""
    def run(tf, name, res):
        x = np.linspace(-1, 1, 2 * 6 * 6 * 3, dtype=np.float32).reshape(2, 6, 6, 3)
        out = fn(tf, x)
        res["out_shape"] = np.array(str(tuple(np.shape(out))))
    return run


BAD = {
    "bad_dense_units0": _bad(lambda tf, x: L(tf).Dense(0)(x)),
    "bad_dense_units_float": _bad(lambda tf, x: L(tf).Dense(2.5)(x)),
    "bad_dense_units_neg": _bad(lambda tf, x: L(tf).Dense(-1)),
    "bad_dense_rank1": _bad(lambda tf, x: L(tf).Dense(2)(x[0, 0, 0])),
    "bad_dense_width": _bad(lambda tf, x: (lambda d: (d(x[:, 0, 0]), d(x[:, 0, :, :2])))(L(tf).Dense(2))[1]),
    "bad_conv_filters0": _bad(lambda tf, x: L(tf).Conv2D(0, 3)(x)),
    "bad_conv_kernel0": _bad(lambda tf, x: L(tf).Conv2D(2, 0)(x)),
    "bad_conv_strides0": _bad(lambda tf, x: L(tf).Conv2D(2, 3, strides=0)(x)),
    "bad_conv_padding": _bad(lambda tf, x: L(tf).Conv2D(2, 3, padding="full")(x)),
    "bad_conv_kernel_too_big": _bad(lambda tf, x: L(tf).Conv2D(2, 7)(x)),
    "bad_conv_rank": _bad(lambda tf, x: L(tf).Conv2D(2, 3)(x[0])),
    "bad_conv_stride_dilation": _bad(lambda tf, x: L(tf).Conv2D(2, 3, strides=2, dilation_rate=2)(x)),
    "bad_conv1d_causal_rank": _bad(lambda tf, x: L(tf).Conv2D(2, 3, padding="causal")(x)),
    "bad_convT_outpad": _bad(lambda tf, x: L(tf).Conv2DTranspose(2, 3, strides=2, output_padding=2)(x)),
    "bad_depthwise_mult0": _bad(lambda tf, x: L(tf).DepthwiseConv2D(3, depth_multiplier=0)(x)),
    "bad_pool0": _bad(lambda tf, x: L(tf).MaxPooling2D(0)(x)),
    "bad_pool_padding": _bad(lambda tf, x: L(tf).MaxPooling2D(2, padding="causal")(x)),
    "bad_pool_too_big": _bad(lambda tf, x: L(tf).MaxPooling2D(7)(x)),
    "bad_dropout_rate": _bad(lambda tf, x: L(tf).Dropout(1.5)(x)),
    "bad_dropout_neg": _bad(lambda tf, x: L(tf).Dropout(-0.1)(x)),
    "bad_bn_axis": _bad(lambda tf, x: L(tf).BatchNormalization(axis=5)(x)),
    "bad_ln_axis": _bad(lambda tf, x: L(tf).LayerNormalization(axis=4)(x)),
    "bad_softmax_axis": _bad(lambda tf, x: L(tf).Softmax(axis=4)(x)),
    "bad_reshape": _bad(lambda tf, x: L(tf).Reshape((7, -1))(x)),
    "bad_reshape_two_unknown": _bad(lambda tf, x: L(tf).Reshape((-1, -1))(x)),
    "bad_permute": _bad(lambda tf, x: L(tf).Permute((1, 1, 2))(x)),
    "bad_permute_zero": _bad(lambda tf, x: L(tf).Permute((0, 1, 2))(x)),
    "bad_repeat_rank": _bad(lambda tf, x: L(tf).RepeatVector(2)(x)),
    "bad_concat": _bad(lambda tf, x: L(tf).Concatenate(axis=1)([x, x[:, :, :3]])),
    "bad_concat_single": _bad(lambda tf, x: L(tf).Concatenate()([x])),
    "bad_add_shapes": _bad(lambda tf, x: L(tf).Add()([x, x[:, :3]])),
    "bad_add_single": _bad(lambda tf, x: L(tf).Add()([x])),
    "bad_dot_axes": _bad(lambda tf, x: L(tf).Dot(axes=1)([x[:, 0, 0], x[:, 0, :2, 0]])),
    "bad_embedding_dim0": _bad(lambda tf, x: L(tf).Embedding(0, 3)(np.zeros((2, 2), np.int32))),
    "bad_embedding_oob": _bad(lambda tf, x: L(tf).Embedding(3, 2)(np.array([[0, 5]], np.int32))),
    "bad_lstm_units0": _bad(lambda tf, x: L(tf).LSTM(0)(x[:, 0])),
    "bad_lstm_rank": _bad(lambda tf, x: L(tf).LSTM(2)(x[:, 0, 0])),
    "bad_gru_units_neg": _bad(lambda tf, x: L(tf).GRU(-2)),
    "bad_bidi_merge": _bad(lambda tf, x: L(tf).Bidirectional(L(tf).LSTM(2), merge_mode="max")),
    "bad_bidi_layer": _bad(lambda tf, x: L(tf).Bidirectional(L(tf).Dense(2))),
    "bad_mha_heads0": _bad(lambda tf, x: L(tf).MultiHeadAttention(0, 2)),
    "bad_mha_dims": _bad(lambda tf, x: L(tf).MultiHeadAttention(2, 2)(x[:, 0], x[:, 0, :, :2])),
    "bad_attention_single": _bad(lambda tf, x: L(tf).Attention()([x[:, 0]])),
    "bad_attention_score": _bad(lambda tf, x: L(tf).Attention(score_mode="foo")),
    "bad_relu_neg_max": _bad(lambda tf, x: L(tf).ReLU(max_value=-1.0)(x)),
    "bad_relu_neg_slope": _bad(lambda tf, x: L(tf).ReLU(negative_slope=-1.0)(x)),
    "bad_leaky_neg": _bad(lambda tf, x: L(tf).LeakyReLU(negative_slope=-0.5)(x)),
    "bad_elu_none": _bad(lambda tf, x: L(tf).ELU(alpha=None)(x)),
    "bad_activation_name": _bad(lambda tf, x: L(tf).Activation("nope")(x)),
    "bad_upsampling": _bad(lambda tf, x: L(tf).UpSampling2D(interpolation="cubic")(x)),
    "bad_cropping_too_much": _bad(lambda tf, x: L(tf).Cropping2D(((3, 3), (0, 0)))(x)),
    "bad_zeropad_neg": _bad(lambda tf, x: L(tf).ZeroPadding2D(-1)(x)),
    "bad_flatten_none": _bad(lambda tf, x: L(tf).Flatten()(x[0, 0, 0])),
    "bad_loss_reduction": _bad(lambda tf, x: tf.keras.losses.MeanSquaredError(reduction="avg")),
    "bad_loss_shapes": _bad(lambda tf, x: tf.keras.losses.MeanSquaredError()(x[:, 0, 0], x[:, 0, :2])),
    "bad_bce_shapes": _bad(lambda tf, x: tf.keras.losses.BinaryCrossentropy()(x[:, 0, 0] * 0, x[:, 0, :2] * 0 + .5)),
    "bad_cce_shapes": _bad(lambda tf, x: tf.keras.losses.CategoricalCrossentropy()(x[:, 0, 0] * 0,
                                                                                   x[:, 0, :2, 0] * 0 + .5)),
    "bad_scce_label_oob": _bad(lambda tf, x: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
        np.array([0, 7]), x[:, 0, 0])),
    "bad_scce_neg_label": _bad(lambda tf, x: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
        np.array([0, -1]), x[:, 0, 0])),
    "bad_metric_shapes": _bad(lambda tf, x: (lambda m: (m.update_state(x[:, 0, 0], x[:, 0, :2]), m.result())[1])(
        tf.keras.metrics.MeanSquaredError())),
    "bad_acc_shapes": _bad(lambda tf, x: (lambda m: (m.update_state(x[:, 0, 0], x[:, 0, :2]), m.result())[1])(
        tf.keras.metrics.BinaryAccuracy())),
    "bad_sparse_acc_oob": _bad(lambda tf, x: (lambda m: (m.update_state(np.array([0, 9]), x[:, 0, 0]),
                                                         m.result())[1])(tf.keras.metrics.SparseCategoricalAccuracy())),
    "bad_topk_k0": _bad(lambda tf, x: (lambda m: (m.update_state(x[:, 0, 0] * 0, x[:, 0, 0]), m.result())[1])(
        tf.keras.metrics.TopKCategoricalAccuracy(k=0))),
    "bad_set_weights_count": _bad(lambda tf, x: (lambda d: (d(x[:, 0, 0]), d.set_weights([np.zeros((3, 2))])))(
        L(tf).Dense(2))[0]),
    "bad_set_weights_shape": _bad(lambda tf, x: (lambda d: (d(x[:, 0, 0]), d.set_weights(
        [np.zeros((3, 3)), np.zeros(2)])))(L(tf).Dense(2))[0]),
    "bad_input_shape_predict": _bad(lambda tf, x: tf.keras.Sequential([tf.keras.Input((4,)), L(tf).Dense(2)]).predict(
        x[:, 0, 0], verbose=0)),
    "bad_fit_lengths": _bad(lambda tf, x: (lambda m: (m.compile("sgd", "mse"), m.fit(
        x[:, 0, 0], np.zeros((3, 2)), verbose=0))[1])(tf.keras.Sequential([tf.keras.Input((3,)), L(tf).Dense(2)]))
        and np.zeros(1)),
    "bad_compile_loss": _bad(lambda tf, x: tf.keras.Sequential([tf.keras.Input((3,)), L(tf).Dense(2)]).compile(
        "sgd", "not_a_loss")),
    "bad_compile_opt": _bad(lambda tf, x: tf.keras.Sequential([tf.keras.Input((3,)), L(tf).Dense(2)]).compile(
        "not_an_opt", "mse")),
}


def _init_stats(make, shapes=((400, 300), (3, 3, 40, 50), (20, 8, 150)), gram=False, bounded=True):
    """Random initializers: not the same numbers, but the same distribution -- mean, std, min
    and max of a large draw (compared loosely, keys ending in _loose)."""
    def body(tf, rng):
        out = {}
        for shape in shapes:
            w = np.asarray(make(tf)(shape)).astype(np.float64)
            tag = "x".join(map(str, shape))
            out[f"{tag}_mean_loose"] = np.array(w.mean())
            out[f"{tag}_std_loose"] = np.array(w.std())
            if bounded:      # (a normal draw's maximum is too noisy to compare)
                out[f"{tag}_absmax_loose"] = np.array(np.abs(w).max())
            if gram and len(shape) == 2:
                w = w if shape[0] >= shape[1] else w.T
                out[f"{tag}_gram_loose"] = (w.T @ w)[:4, :4]
        return out
    return _fn_case(body)


def _layer_init_stats(make, shape, self_attention=False):
    def body(tf, rng):
        layer = make(tf)
        x = np.zeros(shape, np.float32)
        layer(x, x) if self_attention else layer(x)
        out = {}
        for i, w in enumerate(layer.weights):
            a = np.asarray(w).astype(np.float64)
            out[f"{i}_std_loose"] = np.array(a.std())
            out[f"{i}_mean_loose"] = np.array(a.mean())
            out[f"{i}_absmax_loose"] = np.array(np.abs(a).max())
        return out
    return _fn_case(body)


INITS = {
    "init_glorot_uniform": _init_stats(lambda tf: tf.keras.initializers.GlorotUniform(seed=1)),
    "init_glorot_normal": _init_stats(lambda tf: tf.keras.initializers.GlorotNormal(seed=1), bounded=False),
    "init_he_normal": _init_stats(lambda tf: tf.keras.initializers.HeNormal(seed=1), bounded=False),
    "init_he_uniform": _init_stats(lambda tf: tf.keras.initializers.HeUniform(seed=1)),
    "init_lecun_normal": _init_stats(lambda tf: tf.keras.initializers.LecunNormal(seed=1), bounded=False),
    "init_lecun_uniform": _init_stats(lambda tf: tf.keras.initializers.LecunUniform(seed=1)),
    "init_vs_avg_untrunc": _init_stats(lambda tf: tf.keras.initializers.VarianceScaling(
        2.0, "fan_avg", "untruncated_normal", seed=1), bounded=False),
    "init_vs_out_uniform": _init_stats(lambda tf: tf.keras.initializers.VarianceScaling(
        0.5, "fan_out", "uniform", seed=1)),
    "init_vs_in_trunc": _init_stats(lambda tf: tf.keras.initializers.VarianceScaling(
        3.0, "fan_in", "truncated_normal", seed=1)),
    "init_random_normal": _init_stats(lambda tf: tf.keras.initializers.RandomNormal(0.5, 2.0, seed=1), bounded=False),
    "init_random_uniform": _init_stats(lambda tf: tf.keras.initializers.RandomUniform(-0.3, 0.7, seed=1)),
    "init_truncated_normal": _init_stats(lambda tf: tf.keras.initializers.TruncatedNormal(0.1, 0.5, seed=1)),
    "init_orthogonal": _init_stats(lambda tf: tf.keras.initializers.Orthogonal(gain=1.5, seed=1),
                                   shapes=((300, 200), (200, 300), (3, 3, 40, 50)), gram=True, bounded=False),
    "init_identity": _init_stats(lambda tf: tf.keras.initializers.Identity(gain=2.0), shapes=((6, 4), (4, 6)), gram=True),
    "init_layer_dense": _layer_init_stats(lambda tf: L(tf).Dense(300), (2, 400)),
    "init_layer_conv": _layer_init_stats(lambda tf: L(tf).Conv2D(50, 3), (1, 5, 5, 40)),
    "init_layer_convT": _layer_init_stats(lambda tf: L(tf).Conv2DTranspose(50, 3), (1, 5, 5, 40)),
    "init_layer_depthwise": _layer_init_stats(lambda tf: L(tf).DepthwiseConv2D(5, depth_multiplier=8),
                                              (1, 5, 5, 40)),
    "init_layer_sep": _layer_init_stats(lambda tf: L(tf).SeparableConv2D(60, 5, depth_multiplier=4),
                                        (1, 5, 5, 40)),
    "init_layer_embedding": _layer_init_stats(lambda tf: L(tf).Embedding(500, 60), (1, 2)),
    "init_layer_lstm": _layer_init_stats(lambda tf: L(tf).LSTM(64), (1, 2, 100)),
    "init_layer_gru": _layer_init_stats(lambda tf: L(tf).GRU(64), (1, 2, 100)),
    "init_layer_rnn": _layer_init_stats(lambda tf: L(tf).SimpleRNN(64), (1, 2, 100)),
    "init_layer_mha": _layer_init_stats(lambda tf: L(tf).MultiHeadAttention(4, 32), (1, 2, 64), True),
    "init_layer_bn": _layer_init_stats(lambda tf: L(tf).BatchNormalization(), (1, 64)),
    "init_layer_prelu": _layer_init_stats(lambda tf: L(tf).PReLU(), (1, 64)),
    "init_layer_einsum": _layer_init_stats(lambda tf: L(tf).EinsumDense("ab,bc->ac", output_shape=80,
                                                                        bias_axes="c"), (1, 300)),
}


def tf_mask(x):
    # x > -0.5 as the mask, but every row keeps at least its first element
    import numpy as _np_
    m = _np_.asarray(x) > -0.5
    m[:, 0] = True
    return m


# ---------------------------------------------------------------- losses
def _loss_inputs(rng, kind, shape):
    if kind == "prob":
        yt = rng.integers(0, 2, shape).astype(np.float32)
        yp = rng.uniform(0.02, 0.98, shape).astype(np.float32)
    elif kind == "logit":
        yt = rng.integers(0, 2, shape).astype(np.float32)
        yp = rng.uniform(-3, 3, shape).astype(np.float32)
    elif kind == "cat":
        yt = np.eye(shape[-1], dtype=np.float32)[rng.integers(0, shape[-1], shape[:-1])]
        yp = rng.uniform(0.05, 1, shape).astype(np.float32)
        yp /= yp.sum(-1, keepdims=True)
    elif kind == "catlogit":
        yt = np.eye(shape[-1], dtype=np.float32)[rng.integers(0, shape[-1], shape[:-1])]
        yp = rng.uniform(-3, 3, shape).astype(np.float32)
    elif kind == "sparse":
        yt = rng.integers(0, shape[-1], shape[:-1]).astype(np.int32)
        yp = rng.uniform(0.05, 1, shape).astype(np.float32)
        yp /= yp.sum(-1, keepdims=True)
    elif kind == "sparselogit":
        yt = rng.integers(0, shape[-1], shape[:-1]).astype(np.int32)
        yp = rng.uniform(-3, 3, shape).astype(np.float32)
    elif kind == "pm1":
        yt = (rng.integers(0, 2, shape) * 2 - 1).astype(np.float32)
        yp = rng.uniform(-2, 2, shape).astype(np.float32)
    elif kind == "pos":
        yt = rng.uniform(0.1, 3, shape).astype(np.float32)
        yp = rng.uniform(0.1, 3, shape).astype(np.float32)
    else:
        yt = rng.uniform(-2, 2, shape).astype(np.float32)
        yp = rng.uniform(-2, 2, shape).astype(np.float32)
    return yt, yp


def loss_case(cls, kind, shape=(4, 3), sw=None, **kw):
    def run(tf, name, res):
        rng = rng_for(name)
        yt, yp = _loss_inputs(rng, kind, shape)
        loss = getattr(tf.keras.losses, cls)(**kw)
        sample_weight = None
        if sw == "batch":
            sample_weight = rng.uniform(0, 2, (shape[0],)).astype(np.float32)
        elif sw == "full":
            sample_weight = rng.uniform(0, 2, shape[:-1]).astype(np.float32)
        ypt = tf.constant(yp)
        with tf.GradientTape() as tape:
            tape.watch(ypt)
            v = loss(tf.constant(yt), ypt, sample_weight=sample_weight)
        res["value"] = _np(v)
        res["grad"] = _np(tape.gradient(v, ypt))
        res["fn_value"] = _np(tf.function(lambda a, b: loss(a, b, sample_weight=sample_weight))(
            tf.constant(yt), tf.constant(yp)))
    return run


LOSSES = {}
for _cls, _kind in [("MeanSquaredError", "real"), ("MeanAbsoluteError", "real"),
                    ("MeanAbsolutePercentageError", "pos"), ("MeanSquaredLogarithmicError", "pos"),
                    ("Huber", "real"), ("LogCosh", "real"), ("Hinge", "pm1"), ("SquaredHinge", "pm1"),
                    ("CategoricalHinge", "cat"), ("KLDivergence", "cat"), ("Poisson", "pos"),
                    ("CosineSimilarity", "real"), ("BinaryCrossentropy", "prob"),
                    ("CategoricalCrossentropy", "cat"), ("SparseCategoricalCrossentropy", "sparse"),
                    ("BinaryFocalCrossentropy", "prob"), ("CategoricalFocalCrossentropy", "cat"),
                    ("Tversky", "prob"), ("Dice", "prob"), ("CTC", None)]:
    if _kind is None:
        continue
    LOSSES[f"loss_{_cls}"] = loss_case(_cls, _kind)
    LOSSES[f"loss_{_cls}_sw"] = loss_case(_cls, _kind, sw="batch")
    LOSSES[f"loss_{_cls}_sum"] = loss_case(_cls, _kind, sw="batch", reduction="sum")
    LOSSES[f"loss_{_cls}_none"] = loss_case(_cls, _kind, reduction=None)
    LOSSES[f"loss_{_cls}_3d"] = loss_case(_cls, _kind, shape=(2, 3, 4), sw="full")
LOSSES.update({
    "loss_huber_delta": loss_case("Huber", "real", delta=0.3),
    "loss_bce_logits": loss_case("BinaryCrossentropy", "logit", from_logits=True),
    "loss_bce_ls": loss_case("BinaryCrossentropy", "prob", label_smoothing=0.2),
    "loss_bce_logits_ls": loss_case("BinaryCrossentropy", "logit", from_logits=True, label_smoothing=0.2),
    "loss_bce_axis0": loss_case("BinaryCrossentropy", "prob", axis=0, reduction=None),
    "loss_cce_logits": loss_case("CategoricalCrossentropy", "catlogit", from_logits=True),
    "loss_cce_ls": loss_case("CategoricalCrossentropy", "cat", label_smoothing=0.1),
    "loss_cce_logits_ls": loss_case("CategoricalCrossentropy", "catlogit", from_logits=True,
                                    label_smoothing=0.3),
    "loss_cce_axis0": loss_case("CategoricalCrossentropy", "cat", shape=(3, 3), axis=0, reduction=None),
    "loss_scce_logits": loss_case("SparseCategoricalCrossentropy", "sparselogit", from_logits=True),
    "loss_scce_ignore": loss_case("SparseCategoricalCrossentropy", "sparselogit", from_logits=True,
                                  ignore_class=1),
    "loss_bfce_logits": loss_case("BinaryFocalCrossentropy", "logit", from_logits=True, gamma=1.5),
    "loss_bfce_balance": loss_case("BinaryFocalCrossentropy", "prob", apply_class_balancing=True, alpha=0.3,
                                   label_smoothing=0.1),
    "loss_cfce_logits": loss_case("CategoricalFocalCrossentropy", "catlogit", from_logits=True, gamma=1.0,
                                  alpha=0.4),
    "loss_cos_axis0": loss_case("CosineSimilarity", "real", axis=0),
    "loss_mse_mean": loss_case("MeanSquaredError", "real", sw="batch", reduction="mean"),
    "loss_mse_sum_over": loss_case("MeanSquaredError", "real", sw="batch", reduction="sum_over_batch_size"),
    "loss_tversky_ab": loss_case("Tversky", "prob", alpha=0.3, beta=0.7),
})


# ---------------------------------------------------------------- metrics
def metric_case(make, kind, shape=(5, 3), steps=3, sw=False, y=None):
    def run(tf, name, res):
        rng = rng_for(name)
        m = make(tf)
        for i in range(steps):
            if y is not None:
                yt, yp = y(rng, shape)
            else:
                yt, yp = _loss_inputs(rng, kind, shape)
            w = rng.uniform(0, 2, (shape[0],)).astype(np.float32) if sw else None
            m.update_state(yt, yp, sample_weight=w)
            res[f"result{i}"] = np.asarray(m.result(), np.float64)
        m.reset_state()
        res["after_reset"] = np.asarray(m.result(), np.float64)
    return run


def _labels_scores(rng, shape):
    return rng.integers(0, 2, shape).astype(np.float32), rng.uniform(0, 1, shape).astype(np.float32)


def _int_classes(rng, shape):
    return rng.integers(0, 3, shape[:1]).astype(np.int32), rng.integers(0, 3, shape[:1]).astype(np.int32)


def M(tf):
    return tf.keras.metrics


METRICS = {
    "m_accuracy": metric_case(lambda tf: M(tf).Accuracy(), None, y=_int_classes),
    "m_accuracy_sw": metric_case(lambda tf: M(tf).Accuracy(), None, y=_int_classes, sw=True),
    "m_binary_accuracy": metric_case(lambda tf: M(tf).BinaryAccuracy(), None, y=_labels_scores),
    "m_binary_accuracy_thr": metric_case(lambda tf: M(tf).BinaryAccuracy(threshold=0.7), None, y=_labels_scores,
                                         sw=True),
    "m_categorical_accuracy": metric_case(lambda tf: M(tf).CategoricalAccuracy(), "cat"),
    "m_sparse_cat_accuracy": metric_case(lambda tf: M(tf).SparseCategoricalAccuracy(), "sparse", sw=True),
    "m_topk": metric_case(lambda tf: M(tf).TopKCategoricalAccuracy(k=2), "cat", shape=(5, 4)),
    "m_sparse_topk": metric_case(lambda tf: M(tf).SparseTopKCategoricalAccuracy(k=2), "sparse", shape=(5, 4),
                                 sw=True),
    "m_auc": metric_case(lambda tf: M(tf).AUC(), None, y=_labels_scores),
    "m_auc_pr": metric_case(lambda tf: M(tf).AUC(curve="PR", num_thresholds=50), None, y=_labels_scores),
    "m_auc_sw": metric_case(lambda tf: M(tf).AUC(summation_method="minoring"), None, y=_labels_scores, sw=True),
    "m_precision": metric_case(lambda tf: M(tf).Precision(), None, y=_labels_scores),
    "m_precision_thr": metric_case(lambda tf: M(tf).Precision(thresholds=[0.3, 0.6]), None, y=_labels_scores),
    "m_precision_topk": metric_case(lambda tf: M(tf).Precision(top_k=2), None, y=_labels_scores),
    "m_recall": metric_case(lambda tf: M(tf).Recall(thresholds=0.4), None, y=_labels_scores, sw=True),
    "m_recall_class": metric_case(lambda tf: M(tf).Recall(class_id=1), None, y=_labels_scores),
    "m_precision_sw": metric_case(lambda tf: M(tf).Precision(thresholds=[0.2, 0.5, 0.9]), None, y=_labels_scores,
                                  sw=True),
    "m_precision_topk_class": metric_case(lambda tf: M(tf).Precision(top_k=2, class_id=1), None, y=_labels_scores,
                                          shape=(6, 4)),
    "m_recall_topk_sw": metric_case(lambda tf: M(tf).Recall(top_k=1), None, y=_labels_scores, shape=(6, 4), sw=True),
    "m_recall_1d": metric_case(lambda tf: M(tf).Recall(thresholds=[0.5]), None, y=_labels_scores, shape=(6,)),
    "m_precision_1d_sw": metric_case(lambda tf: M(tf).Precision(), None, y=_labels_scores, shape=(6,), sw=True),
    "m_tn": metric_case(lambda tf: M(tf).TrueNegatives(thresholds=[0.0, 0.5, 1.0]), None, y=_labels_scores, sw=True),
    "m_fp": metric_case(lambda tf: M(tf).FalsePositives(), None, y=_labels_scores),
    "m_tp": metric_case(lambda tf: M(tf).TruePositives(), None, y=_labels_scores),
    "m_fn": metric_case(lambda tf: M(tf).FalseNegatives(thresholds=[0.2, 0.8]), None, y=_labels_scores),
    "m_meaniou": metric_case(lambda tf: M(tf).MeanIoU(num_classes=3), None, y=_int_classes),
    "m_meaniou_sw": metric_case(lambda tf: M(tf).MeanIoU(num_classes=3), None, y=_int_classes, sw=True),
    "m_iou": metric_case(lambda tf: M(tf).IoU(num_classes=3, target_class_ids=[0, 2]), None, y=_int_classes),
    "m_f1": metric_case(lambda tf: M(tf).F1Score(), None, y=_labels_scores),
    "m_f1_micro": metric_case(lambda tf: M(tf).F1Score(average="micro", threshold=0.5), None, y=_labels_scores),
    "m_f1_macro": metric_case(lambda tf: M(tf).F1Score(average="macro", threshold=0.4), None, y=_labels_scores),
    "m_f1_weighted": metric_case(lambda tf: M(tf).F1Score(average="weighted", threshold=0.5), None,
                                 y=_labels_scores),
    "m_fbeta": metric_case(lambda tf: M(tf).FBetaScore(beta=2.0, threshold=0.5), None, y=_labels_scores),
    "m_r2": metric_case(lambda tf: M(tf).R2Score(), "real"),
    "m_r2_uniform": metric_case(lambda tf: M(tf).R2Score(multioutput="raw_values"), "real"),
    "m_r2_var": metric_case(lambda tf: M(tf).R2Score(multioutput="variance_weighted"), "real", sw=True),
    "m_mse": metric_case(lambda tf: M(tf).MeanSquaredError(), "real", sw=True),
    "m_mae": metric_case(lambda tf: M(tf).MeanAbsoluteError(), "real"),
    "m_rmse": metric_case(lambda tf: M(tf).RootMeanSquaredError(), "real", sw=True),
    "m_mape": metric_case(lambda tf: M(tf).MeanAbsolutePercentageError(), "pos"),
    "m_cos": metric_case(lambda tf: M(tf).CosineSimilarity(), "real"),
    "m_bce": metric_case(lambda tf: M(tf).BinaryCrossentropy(), "prob", sw=True),
    "m_cce": metric_case(lambda tf: M(tf).CategoricalCrossentropy(from_logits=True), "catlogit"),
    "m_scce": metric_case(lambda tf: M(tf).SparseCategoricalCrossentropy(), "sparse"),
    "m_kld": metric_case(lambda tf: M(tf).KLDivergence(), "cat"),
    "m_hinge": metric_case(lambda tf: M(tf).Hinge(), "pm1"),
    "m_logcosh": metric_case(lambda tf: M(tf).LogCoshError(), "real"),
    "m_poisson": metric_case(lambda tf: M(tf).Poisson(), "pos"),
}


def _mean_case(cls):
    def run(tf, name, res):
        rng = rng_for(name)
        m = getattr(tf.keras.metrics, cls)()
        for i in range(3):
            v = rng.uniform(-2, 2, (4,)).astype(np.float32)
            w = rng.uniform(0, 2, (4,)).astype(np.float32)
            m.update_state(v, sample_weight=w if i else None)
            res[f"result{i}"] = np.asarray(m.result(), np.float64)
    return run


METRICS["m_mean"] = _mean_case("Mean")
METRICS["m_sum"] = _mean_case("Sum")

CASES = {**LAYERS, **LOSSES, **METRICS, **MODELS, **EXTRA, **BAD, **INITS}


def run_side(module, out, filters):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = __import__(module)
    if module == "tensorflow":
        tf.get_logger().setLevel("ERROR")
    results = {}
    for name, case in CASES.items():
        if filters and not any(f in name for f in filters):
            continue
        res = {}
        try:
            case(tf, name, res)
        except Exception as e:  # noqa: BLE001 - the sweep records what each side raises
            res["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        results[name] = res
    with open(out, "wb") as f:
        pickle.dump(results, f)


def _differs(a, b, loose=False):
    if a.dtype.kind in "US" or b.dtype.kind in "US":
        return str(a) != str(b)
    if a.shape != b.shape:
        return True
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if loose:        # statistics of random draws
        return not np.allclose(a64, b64, rtol=0.06, atol=0.02 * max(1.0, float(np.abs(a64).max())))
    return not np.allclose(a64, b64, rtol=2e-4, atol=2e-5, equal_nan=True)


def compare(ref, got):
    bad = 0
    for name in ref:
        r, g = ref[name], got.get(name, {})
        if "error" in r or "error" in g:
            re_, ge = r.get("error"), g.get("error")
            if (re_ or "").split(":")[0] != (ge or "").split(":")[0]:
                print(f"{name}: TF {re_!r}  jitgrad {ge!r}")
                bad += 1
            else:
                print(f"{name}: both raise {re_!r} / {ge!r}")
            if re_ or ge:
                continue
        for key in r:
            if key not in g:
                print(f"{name}.{key}: missing in jitgrad")
                bad += 1
            elif _differs(np.asarray(r[key]), np.asarray(g[key]), key.endswith("_loose")):
                a, b = np.asarray(r[key]), np.asarray(g[key])
                print(f"{name}.{key}: differs\n  TF      {a.shape} {np.array2string(a.ravel()[:8], precision=5)}"
                      f"\n  jitgrad {b.shape} {np.array2string(b.ravel()[:8], precision=5)}")
                bad += 1
    print(f"{len(ref)} cases, {bad} differences")


def main():
    if len(sys.argv) > 3 and sys.argv[1] == "--side":
        return run_side(sys.argv[2], sys.argv[3], sys.argv[4:])
    filters = sys.argv[1:]
    cache = os.environ.get("JITGRAD_CACHE_DIR", "/tmp/cache-keras-parity")
    outs = {}
    for module, pypath in (("tensorflow", ""), ("jitgrad", HERE)):
        out = f"/tmp/keras_parity_{module}_{os.getpid()}.pkl"
        env = dict(os.environ, PYTHONPATH=pypath, JITGRAD_CACHE_DIR=cache, TF_CPP_MIN_LOG_LEVEL="3")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--side", module, out, *filters],
                       env=env, check=True)
        with open(out, "rb") as f:
            outs[module] = pickle.load(f)
        if not os.environ.get("KERAS_PARITY_KEEP"):
            os.unlink(out)
    compare(outs["tensorflow"], outs["jitgrad"])


if __name__ == "__main__":
    main()
