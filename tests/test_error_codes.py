"""The kernels' status codes are one table (codegen/irutil.py): each code defined once,
with its message; ListCheck's kinds (ops/list_ops.py) take their codes from it."""
from jitgrad.codegen import irutil
from jitgrad.ops import list_ops


def _codes():
    return {name: v for name, v in vars(irutil).items() if name.startswith("ERR_") and isinstance(v, int)}


def test_every_code_is_defined_once_and_has_a_message():
    codes = _codes()
    assert len(set(codes.values())) == len(codes), codes
    for name, v in codes.items():
        assert v > 0, name                      # 0 is "no error" in the status word
        if name != "ERR_ASSERT":                # (its message is the failed tf.Assert's data)
            assert v in irutil.ERROR_MESSAGES, name


def test_list_check_kinds_take_their_codes_from_the_table():
    assert set(irutil.LIST_CHECK_CODES) == set(list_ops.KINDS)
    assert set(irutil.LIST_CHECK_CODES.values()) <= set(_codes().values())
    # the numbers already in use by compiled code stay as they were
    assert irutil.LIST_CHECK_CODES == {"access": 20, "modify": 21, "gather": 22, "scatter": 23, "length": 24,
                                       "unstack": 25, "append": 26}
    assert (irutil.ERR_INT_DIV_ZERO, irutil.ERR_ROW_INDEX) == (1, 9)


def test_value_messages_are_tfs():
    # TF 2.21's TensorList kernels' texts
    assert list_ops.message("access", 5, 3) == "Trying to access element 5 in a list with 3 elements."
    assert list_ops.message("scatter", 4, 3) == ("Operation expected a list with 3 elements but got a list "
                                                 "with 5 elements.")
    assert list_ops.message("scatter", -1, 3) == "Trying to modify element -1 in a list with 3 elements."
    assert list_ops.message("length", 2, 3) == "Expected len(indices) == tensor.shape[0], but saw: 2 vs. 3"
