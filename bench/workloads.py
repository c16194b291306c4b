"""Benchmark workloads W1-W5: inputs, a hand-written numpy reference, and a
builder per backend. A builder returns a zero-argument callable that computes
value and gradient once and returns the results as numpy arrays (used to check
that every backend gives the same numbers before anything is timed)."""
import numpy as np

# ------------------------------------------------------------------ W1
def w1_inputs():
    return {"x": np.float32(1.0), "y": np.float32(2.0)}


def w1_numpy(x, y):
    return [np.float32(2) * x, np.float32(3) * y * y]


def w1_graph(mode):
    """The seed graph z = x**2 + y**3 with gradients wrt the scalar placeholders x, y."""
    import jitgrad as tf
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        y = tf.compat.v1.placeholder(tf.float32, [])
        z = x ** 2 + y ** 3
        grads = tf.gradients(z, [x, y])
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
    return sess, x, y, grads


def w1_jitgrad(mode):
    sess, x, y, grads = w1_graph(mode)
    inp = w1_inputs()
    feed = {x: inp["x"], y: inp["y"]}
    return lambda: sess.run(grads, feed_dict=feed)


# ------------------------------------------------------------------ W2
def w2_inputs(n):
    return {"x": np.random.default_rng(2).uniform(-3, 3, n).astype(np.float32)}


def w2_numpy(x):
    t = np.tanh(x)
    e = np.exp(-x * x)
    s = np.sqrt(x * x + 1)
    value = np.sum(t * e + s)
    grad = (1 - t * t) * e + t * e * (-2 * x) + x / s
    return [value, grad]


def w2_jitgrad(mode, n):
    import jitgrad as tf
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [n])
        f = tf.reduce_sum(tf.tanh(x) * tf.exp(-x * x) + tf.sqrt(x * x + 1))
        grad = tf.gradients(f, x)[0]
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
    feed = {x: w2_inputs(n)["x"]}
    return lambda: sess.run([f, grad], feed_dict=feed)


# ------------------------------------------------------------------ W3
def w3_inputs():
    rng = np.random.default_rng(3)
    labels = np.zeros((256, 10), np.float32)
    labels[np.arange(256), rng.integers(0, 10, 256)] = 1
    return {"X": rng.standard_normal((256, 784)).astype(np.float32),
            "Y": labels,
            "W1": (rng.standard_normal((784, 512)) * 0.05).astype(np.float32),
            "b1": np.zeros(512, np.float32),
            "W2": (rng.standard_normal((512, 10)) * 0.05).astype(np.float32),
            "b2": np.zeros(10, np.float32)}


def w3_numpy(X, Y, W1, b1, W2, b2):
    h_pre = X @ W1 + b1
    h = np.maximum(h_pre, 0)
    logits = h @ W2 + b2
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(axis=1, keepdims=True)
    logp = logits - m - np.log(s)
    loss = -np.mean(np.sum(Y * logp, axis=1))
    dlogits = (e / s - Y) / X.shape[0]
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(axis=0)
    dh = dlogits @ W2.T
    dh_pre = dh * (h_pre > 0)
    dW1 = X.T @ dh_pre
    db1 = dh_pre.sum(axis=0)
    return [loss, dW1, db1, dW2, db2]


def w3_jitgrad(mode):
    import jitgrad as tf
    inp = w3_inputs()
    g = tf.Graph()
    with g.as_default():
        ph = {k: tf.compat.v1.placeholder(tf.float32, v.shape, name=k) for k, v in inp.items()}
        h = tf.nn.relu(tf.matmul(ph["X"], ph["W1"]) + ph["b1"])
        logits = tf.matmul(h, ph["W2"]) + ph["b2"]
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=ph["Y"], logits=logits))
        grads = tf.gradients(loss, [ph["W1"], ph["b1"], ph["W2"], ph["b2"]])
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
    feed = {ph[k]: v for k, v in inp.items()}
    return lambda: sess.run([loss] + grads, feed_dict=feed)


def w3_training(scope, lr=0.1):
    """The W3 MLP as a training loop's two steps (jitgrad.function), with its parameters
    created as variables under ``scope`` (a strategy's scope(), or a null context):
    grad_step(X, Y, global_batch) -> (loss, grads), the loss summed over the examples fed
    and divided by the global batch size, so that the gradients of a batch's shards SUM to
    the batch's mean-loss gradient; apply_step(grads) is plain SGD.  -> (params, grad_step,
    apply_step)."""
    import jitgrad as tf
    inp = w3_inputs()
    lr = np.float32(lr)
    with scope:
        params = [tf.Variable(inp[k], name=k) for k in ("W1", "b1", "W2", "b2")]
    W1, b1, W2, b2 = params

    @tf.function
    def grad_step(X, Y, global_batch):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(X, W1) + b1)
            logits = tf.matmul(h, W2) + b2
            xent = tf.nn.softmax_cross_entropy_with_logits(labels=Y, logits=logits)
            loss = tf.reduce_sum(xent) / global_batch
        return loss, tape.gradient(loss, params)

    @tf.function
    def apply_step(grads):
        for p, g in zip(params, grads):
            p.assign_sub(lr * g)

    return params, grad_step, apply_step


# ------------------------------------------------------------------ W4
def w4_inputs():
    return {"x": np.random.default_rng(4).uniform(-2, 2, 100).astype(np.float32)}


def w4_numpy(x):
    # d2/dx2 of sin(x) x^2 = -sin x x^2 + 4 x cos x + 2 sin x, on the diagonal
    return [np.diag(-np.sin(x) * x * x + 4 * x * np.cos(x) + 2 * np.sin(x)).astype(np.float32)]


def w4_jitgrad(mode):
    import jitgrad as tf
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [100])
        h = tf.hessians(tf.reduce_sum(tf.sin(x) * x ** 2), x)[0]
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
    feed = {x: w4_inputs()["x"]}
    return lambda: [sess.run(h, feed_dict=feed)]


# ------------------------------------------------------------------ W5
def w5_inputs():
    rng = np.random.default_rng(5)
    return {"W": (rng.standard_normal((256, 256)) / 16).astype(np.float32),
            "x": rng.standard_normal(256).astype(np.float32)}


def w5_numpy(W, x):
    t = np.tanh(W @ x)
    return [(1 - t * t)[:, None] * W]


def w5_jitgrad(mode):
    import jitgrad as tf
    inp = w5_inputs()
    if mode != "compiled" or not hasattr(tf, "function"):
        return None
    W = tf.constant(inp["W"])

    @tf.function
    def jac(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.tanh(tf.linalg.matmul(W, tf.reshape(x, [256, 1]))[:, 0])
        return tape.jacobian(y, x)
    x = tf.constant(inp["x"])
    return lambda: [np.asarray(jac(x))]
