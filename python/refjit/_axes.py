"""The named axes refjit.distributed has bound to processes: their sizes are what JAX traces
``lax.psum`` / ``lax.pmean`` / ``lax.axis_index`` with in a plain function (make_jaxpr's
axis_env), and part of every compile-cache key (a program traced for 2 processes divides a
pmean by 2)."""

bound: dict[str, int] = {}


def axis_env() -> list[tuple[str, int]]:
    """(name, size) of every bound axis, in binding order."""
    return list(bound.items())


def cache_key() -> tuple:
    return tuple(bound.items())
