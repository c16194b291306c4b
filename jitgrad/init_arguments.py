"""Classes whose config is the arguments their constructor was called with (Keras 3's
auto_config): ``RecordsInitArguments`` wraps each subclass's ``__init__`` so the outermost
call records all of its parameters, defaults included, as ``_init_arguments``."""
import functools
import inspect


def _recording(init):
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if "_init_arguments" not in self.__dict__:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments, extra = {}, ()
            for name, value in list(bound.arguments.items())[1:]:
                kind = signature.parameters[name].kind
                if kind == inspect.Parameter.VAR_KEYWORD:
                    arguments.update(value)
                elif kind == inspect.Parameter.VAR_POSITIONAL:
                    extra = tuple(value)
                else:
                    arguments[name] = value
            object.__setattr__(self, "_init_arguments", arguments)
            object.__setattr__(self, "_init_positional_extra", extra)
        init(self, *args, **kwargs)
    return __init__


class RecordsInitArguments:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _recording(cls.__dict__["__init__"])

    def _constructor_arguments(self):
        """The recorded arguments (keyword form); positional ones a ``*args`` took cannot be."""
        if self.__dict__.get("_init_positional_extra"):
            raise NotImplementedError(f"jitgrad cannot serialize {type(self).__name__} made with positional "
                                      "arguments beyond its named parameters: pass them by keyword.")
        return dict(self.__dict__.get("_init_arguments", {}))
