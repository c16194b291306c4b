"""The same workloads on other frameworks, when they are importable:
TensorFlow (graph Session, tf.function, tf.function(jit_compile=True)),
JAX (jax.jit) and PyTorch (eager). Each builder returns a zero-argument
callable giving numpy results, or raises ImportError."""
import numpy as np

import workloads as W


def _tf():
    import tensorflow as tf  # noqa: F401
    return tf


def _np(xs):
    return [np.asarray(x) for x in xs]


# ------------------------------------------------------------------ TensorFlow
def tf_session(name, **kw):
    tf = _tf()
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        if name == "W1":
            x, y = v1.placeholder(tf.float32, []), v1.placeholder(tf.float32, [])
            out = tf.gradients(x ** 2 + y ** 3, [x, y])
            inp = W.w1_inputs()
            feed = {x: inp["x"], y: inp["y"]}
        elif name == "W2":
            n = kw["n"]
            x = v1.placeholder(tf.float32, [n])
            f = tf.reduce_sum(tf.tanh(x) * tf.exp(-x * x) + tf.sqrt(x * x + 1))
            out = [f, tf.gradients(f, x)[0]]
            feed = {x: W.w2_inputs(n)["x"]}
        elif name == "W3":
            inp = W.w3_inputs()
            ph = {k: v1.placeholder(tf.float32, v.shape) for k, v in inp.items()}
            h = tf.nn.relu(tf.matmul(ph["X"], ph["W1"]) + ph["b1"])
            logits = tf.matmul(h, ph["W2"]) + ph["b2"]
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=ph["Y"], logits=logits))
            out = [loss] + tf.gradients(loss, [ph["W1"], ph["b1"], ph["W2"], ph["b2"]])
            feed = {ph[k]: v for k, v in inp.items()}
        elif name == "W4":
            x = v1.placeholder(tf.float32, [100])
            out = [tf.hessians(tf.reduce_sum(tf.sin(x) * x ** 2), x)[0]]
            feed = {x: W.w4_inputs()["x"]}
        else:
            return None
    sess = v1.Session(graph=g)
    return lambda: _np(sess.run(out, feed_dict=feed))


def tf_function(name, jit=False, **kw):
    tf = _tf()
    if name == "W1":
        @tf.function(jit_compile=jit)
        def f(x, y):
            with tf.GradientTape() as t:
                t.watch([x, y])
                z = x ** 2 + y ** 3
            return t.gradient(z, [x, y])
        inp = W.w1_inputs()
        args = (tf.constant(inp["x"]), tf.constant(inp["y"]))
    elif name == "W2":
        @tf.function(jit_compile=jit)
        def f(x):
            with tf.GradientTape() as t:
                t.watch(x)
                v = tf.reduce_sum(tf.tanh(x) * tf.exp(-x * x) + tf.sqrt(x * x + 1))
            return [v, t.gradient(v, x)]
        args = (tf.constant(W.w2_inputs(kw["n"])["x"]),)
    elif name == "W3":
        inp = W.w3_inputs()

        @tf.function(jit_compile=jit)
        def f(X, Y, W1, b1, W2, b2):
            with tf.GradientTape() as t:
                t.watch([W1, b1, W2, b2])
                h = tf.nn.relu(tf.matmul(X, W1) + b1)
                logits = tf.matmul(h, W2) + b2
                loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=Y, logits=logits))
            return [loss] + t.gradient(loss, [W1, b1, W2, b2])
        args = tuple(tf.constant(inp[k]) for k in ["X", "Y", "W1", "b1", "W2", "b2"])
    elif name == "W4":
        @tf.function(jit_compile=jit)
        def f(x):
            with tf.GradientTape() as t2:
                t2.watch(x)
                with tf.GradientTape() as t1:
                    t1.watch(x)
                    v = tf.reduce_sum(tf.sin(x) * x ** 2)
                g = t1.gradient(v, x)
            return [t2.jacobian(g, x)]
        args = (tf.constant(W.w4_inputs()["x"]),)
    elif name == "W5":
        inp = W.w5_inputs()
        Wm = tf.constant(inp["W"])

        @tf.function(jit_compile=jit)
        def f(x):
            with tf.GradientTape() as t:
                t.watch(x)
                y = tf.tanh(tf.linalg.matvec(Wm, x))
            return [t.jacobian(y, x)]
        args = (tf.constant(inp["x"]),)
    else:
        return None
    return lambda: _np(f(*args))


# ------------------------------------------------------------------ JAX
def jax_jit(name, **kw):
    import jax
    import jax.numpy as jnp
    if name == "W1":
        f = jax.jit(jax.grad(lambda x, y: x ** 2 + y ** 3, argnums=(0, 1)))
        inp = W.w1_inputs()
        args = (jnp.float32(inp["x"]), jnp.float32(inp["y"]))
    elif name == "W2":
        f = jax.jit(jax.value_and_grad(lambda x: jnp.sum(jnp.tanh(x) * jnp.exp(-x * x) + jnp.sqrt(x * x + 1))))
        args = (jnp.asarray(W.w2_inputs(kw["n"])["x"]),)
    elif name == "W3":
        inp = W.w3_inputs()

        def loss(params, X, Y):
            W1, b1, W2, b2 = params
            h = jax.nn.relu(X @ W1 + b1)
            logits = h @ W2 + b2
            return -jnp.mean(jnp.sum(Y * jax.nn.log_softmax(logits), axis=1))
        g = jax.jit(jax.value_and_grad(loss))
        params = tuple(jnp.asarray(inp[k]) for k in ["W1", "b1", "W2", "b2"])
        X, Y = jnp.asarray(inp["X"]), jnp.asarray(inp["Y"])

        def run():
            v, gs = g(params, X, Y)
            return [np.asarray(v)] + [np.asarray(x) for x in gs]
        return run
    elif name == "W4":
        f = jax.jit(jax.hessian(lambda x: jnp.sum(jnp.sin(x) * x ** 2)))
        args = (jnp.asarray(W.w4_inputs()["x"]),)
    elif name == "W5":
        inp = W.w5_inputs()
        Wm = jnp.asarray(inp["W"])
        f = jax.jit(jax.jacrev(lambda x: jnp.tanh(Wm @ x)))
        args = (jnp.asarray(inp["x"]),)
    else:
        return None

    def run():
        out = f(*args)
        out = out if isinstance(out, (tuple, list)) else [out]
        return [np.asarray(o) for o in out]
    return run


# ------------------------------------------------------------------ PyTorch
def torch_eager(name, **kw):
    import torch

    def T(a):
        return torch.tensor(np.asarray(a), requires_grad=True)
    if name == "W1":
        inp = W.w1_inputs()

        def run():
            x, y = T(inp["x"]), T(inp["y"])
            z = x ** 2 + y ** 3
            return [g.detach().numpy() for g in torch.autograd.grad(z, [x, y])]
    elif name == "W2":
        xv = W.w2_inputs(kw["n"])["x"]

        def run():
            x = T(xv)
            v = torch.sum(torch.tanh(x) * torch.exp(-x * x) + torch.sqrt(x * x + 1))
            (g,) = torch.autograd.grad(v, [x])
            return [v.detach().numpy(), g.numpy()]
    elif name == "W3":
        inp = W.w3_inputs()
        X, Y = torch.tensor(inp["X"]), torch.tensor(inp["Y"])

        def run():
            W1, b1, W2, b2 = (T(inp[k]) for k in ["W1", "b1", "W2", "b2"])
            h = torch.relu(X @ W1 + b1)
            logits = h @ W2 + b2
            loss = -(Y * torch.log_softmax(logits, 1)).sum(1).mean()
            gs = torch.autograd.grad(loss, [W1, b1, W2, b2])
            return [loss.detach().numpy()] + [g.numpy() for g in gs]
    elif name == "W4":
        xv = W.w4_inputs()["x"]
        f = lambda x: torch.sum(torch.sin(x) * x ** 2)  # noqa: E731

        def run():
            return [torch.autograd.functional.hessian(f, torch.tensor(xv)).numpy()]
    elif name == "W5":
        inp = W.w5_inputs()
        Wm = torch.tensor(inp["W"])

        def run():
            return [torch.autograd.functional.jacobian(lambda x: torch.tanh(Wm @ x), torch.tensor(inp["x"])).numpy()]
    else:
        return None
    return run
