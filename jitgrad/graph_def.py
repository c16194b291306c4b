"""``Graph.as_graph_def()``: a GraphDef-like view of a graph for programs that
list its nodes (``for n in g.as_graph_def().node: print(n.name, n.op, n.input)``).

Each ``NodeDef`` has TF's ``name``, ``op``, ``input`` (``"x"`` for output 0,
``"x:1"`` for others, ``"^x"`` for control inputs), ``device`` and ``attr``
(jitgrad's own attrs: they are not TF's AttrValue protos). ``str()`` prints
the text format's name / op / input lines; it is not a serialisable protobuf.
"""


class NodeDef:
    __slots__ = ("name", "op", "input", "device", "attr")

    def __init__(self, name, op, inputs, attr):
        self.name = name
        self.op = op
        self.input = inputs
        self.device = ""
        self.attr = attr

    def __str__(self):
        return "".join([f'name: "{self.name}"\n', f'op: "{self.op}"\n'] + [f'input: "{i}"\n' for i in self.input])

    def __repr__(self):
        return f"<NodeDef name={self.name!r} op={self.op!r} input={self.input!r}>"


class GraphDef:
    __slots__ = ("node", "versions")

    def __init__(self, nodes):
        self.node = nodes
        self.versions = None

    def __str__(self):
        return "".join("node {\n" + "".join("  " + line + "\n" for line in str(n).splitlines()) + "}\n"
                       for n in self.node)

    def __len__(self):
        return len(self.node)


def _input_name(t):
    return t.op.name if t.value_index == 0 else t.name


def graph_def(graph):
    nodes = []
    for op in graph.get_operations():
        inputs = [_input_name(t) for t in op.inputs] + ["^" + c.name for c in op.control_inputs]
        nodes.append(NodeDef(op.name, op.type, inputs, dict(op.attrs)))
    return GraphDef(nodes)
