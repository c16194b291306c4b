"""``tf.keras.callbacks``: the protocol and the always-there callbacks (base_callbacks.py), the
ones that watch a quantity (monitor_callbacks.py), set the rate, stop or log (training_callbacks.py)
and save (checkpoint_callbacks.py)."""
from .base_callbacks import Callback, CallbackList, History, LambdaCallback, Progbar, ProgbarLogger  # noqa: F401
from .checkpoint_callbacks import BackupAndRestore, ModelCheckpoint  # noqa: F401
from .monitor_callbacks import EarlyStopping, MonitorCallback, ReduceLROnPlateau  # noqa: F401
from .training_callbacks import CSVLogger, LearningRateScheduler, TerminateOnNaN  # noqa: F401
